import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCloudPath } from "../../src/http/auth.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { resolvedOperation } from "../support/auth-matrix.ts";
import { capturingLogger, errorLines } from "./log-capture.ts";
import { type RawAnswer, RawConnection } from "./raw-http.ts";

/**
 * A property-based fuzzer of the served OpenAPI document and of the CDN edge. For every operation
 * it generates requests from the operation's own parameter and body schemas, mixed with hostile
 * input (deep nesting, wide objects and arrays, prototype and duplicate keys, huge numbers, NUL,
 * lone surrogates and invalid UTF-8, wrong and missing content types, broken multipart, bodies
 * shorter than their declared length), cloud forms as the cloud reads them (JSON text in a field,
 * bracket paths, deep and prototype paths, repeated keys), the operation's header parameters (tus)
 * and headers any route reads (Range, conditionals, cookies, odd credentials), HEAD on every GET
 * route and one undeclared method per path, and sends them over raw connections to the real server. A
 * request fails the property when it gets a 5xx, an error body outside the contract's shape, no
 * answer within a few seconds, or makes the server log at `error` or above; fast-check then shrinks
 * it to a small reproduction. After each operation the fuzzer's key must still open both groups: a
 * request that revoked it once left every later operation fuzzed only up to its 401.
 *
 * Fixed seed and a bounded number of runs per operation here; `npm run fuzz` runs longer
 * (FUZZ_RUNS runs per operation, FUZZ_SEED to replay or vary).
 */

const SEED = Number(process.env.FUZZ_SEED ?? 11_18_2026);
const RUNS = Number(process.env.FUZZ_RUNS ?? 8);
const EDGE_RUNS = RUNS * 40;
const ANSWER_TIMEOUT_MS = 5_000;
/** Room for a long `npm run fuzz`, and for shrinking a failure (each hanging try waits its timeout). */
const TEST_TIMEOUT_MS = Math.max(600_000, RUNS * 30_000);

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  minimum?: number;
  maximum?: number;
  additionalProperties?: boolean | JsonSchema;
};

interface Operation {
  method: string;
  path: string;
  parameters: { name: string; in: string; schema?: JsonSchema }[];
  bodySchema: JsonSchema | undefined;
  bodyTypes: string[];
  /** Statuses whose documented answer may be plain text (tus's own refusals). */
  textStatuses: number[];
  /** Methods the path does not declare, one of them per request (`method` is the first), to see them refused. */
  undeclared?: string[];
}

interface FuzzRequest {
  method: string;
  target: string;
  headers: Record<string, string>;
  body: Buffer;
  /** Bytes the Content-Length header claims beyond the body actually sent (then the client stops sending). */
  missingBytes: number;
}

const METHODS = ["get", "post", "put", "patch", "delete", "head", "options"];

function operationsOf(document: { paths?: Record<string, Record<string, any>> }): Operation[] {
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    // The aliases under the cloud group prefix run the handlers of the /v1 routes fuzzed here (their
    // routing and authentication are in test/cloud/routing.test.ts and the authentication matrix).
    if (path.startsWith("/v1/cloud/")) continue;
    let pathParameters: Operation["parameters"] = [];
    const declared = new Set<string>();
    for (const method of METHODS) {
      // A cloud route's body is in `components`, shared with its alias (src/http/openapi.ts).
      const operation = resolvedOperation(document, item[method]);
      if (!operation) continue;
      declared.add(method);
      const content = operation.requestBody?.content ?? {};
      const bodyTypes = Object.keys(content);
      const bodySchema = (content["application/json"] ?? content[bodyTypes[0] ?? ""])?.schema;
      const parameters: Operation["parameters"] = operation.parameters ?? [];
      pathParameters = parameters.filter((parameter) => parameter.in === "path");
      const responses: Record<string, { content?: Record<string, unknown> }> = operation.responses ?? {};
      operations.push({
        method: method.toUpperCase(),
        path,
        parameters,
        bodySchema,
        bodyTypes,
        textStatuses: Object.entries(responses)
          .filter(([, answer]) => answer.content?.["text/plain"] !== undefined)
          .map(([status]) => Number(status)),
      });
    }
    // Every GET route answers HEAD too; other methods are refused (404 or 405) in the contract's shape.
    const undeclared = [...METHODS, "trace", "purge"]
      .filter((method) => !declared.has(method) && !(method === "head" && declared.has("get")))
      .map((method) => method.toUpperCase());
    if (undeclared.length > 0) {
      operations.push({
        method: undeclared[0] ?? "",
        path,
        parameters: pathParameters,
        bodySchema: undefined,
        bodyTypes: [],
        textStatuses: [],
        undeclared,
      });
    }
    if (declared.has("get") && !declared.has("head")) {
      const get = operations.find((operation) => operation.path === path && operation.method === "GET");
      if (get) operations.push({ ...get, method: "HEAD" });
    }
  }
  return operations;
}

// ---------------------------------------------------------------------------------------------
// Values

const HOSTILE_STRINGS = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "a\ud800b",
  "\udc00",
  "\ud83d",
  "😀",
  "\u202e\u200b",
  "x".repeat(70_000),
  "../../etc/passwd",
  "%00",
  "%ED%A0%80",
  "null",
  "-1",
  "1e309",
  "99999999999999999999",
  "not-a-uuid",
  "00000000-0000-0000-0000-000000000000",
  "<script>alert(1)</script>",
  "' OR 1=1 --",
  "http://169.254.169.254/latest/meta-data/",
  "http://[::1]:22/",
  "__proto__",
];

/** Number tokens JSON allows but JavaScript cannot hold exactly (or at all). */
const HUGE_NUMBER_TOKENS = [
  "1e309",
  "-1e309",
  "1e-400",
  "123456789012345678901234567890",
  "9007199254740993",
  "-0",
  "0.0000000000000000000000001",
  "1E400",
];

const hostileString = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 40 }) },
);

const json = (value: unknown): string => JSON.stringify(value);

/** Percent-encodes text as its UTF-8 bytes (a lone surrogate becomes U+FFFD, as any client would send it). */
const percentEncoded = (text: string): string =>
  [...Buffer.from(text, "utf8")]
    .map((byte) =>
      /[A-Za-z0-9\-_.~]/.test(String.fromCharCode(byte))
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).padStart(2, "0").toUpperCase()}`,
    )
    .join("");

/** JSON text nested `depth` levels deep, as an object or an array. */
const nestedText = fc
  .tuple(fc.constantFrom(8, 63, 64, 65, 100, 1000, 5000, 20_000), fc.boolean())
  .map(([depth, asObject]) =>
    asObject ? `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}` : `${"[".repeat(depth)}1${"]".repeat(depth)}`,
  );

const wideText = fc.oneof(
  fc.constantFrom(100, 5_000, 50_000).map((count) => json(Array.from({ length: count }, (_, i) => i))),
  fc
    .constantFrom(100, 5_000)
    .map((count) => json(Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, i])))),
);

const prototypeText = fc.constantFrom(
  '{"__proto__":{"admin":true}}',
  '{"constructor":{"prototype":{"admin":true}}}',
  '{"prototype":1,"toString":"x","hasOwnProperty":null}',
);

/** A JSON value (as text) that no schema expects. */
const hostileValueText: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: hostileString.map(json) },
  { weight: 2, arbitrary: fc.constantFrom(...HUGE_NUMBER_TOKENS) },
  { weight: 2, arbitrary: fc.constantFrom("null", "true", "false", "0", "-1", "1.5", "[]", "{}") },
  { weight: 1, arbitrary: nestedText },
  { weight: 1, arbitrary: wideText },
  { weight: 1, arbitrary: prototypeText },
);

const FORMAT_EXAMPLES: Record<string, string[]> = {
  uuid: ["5b0c9a1e-8d3f-4c2a-9e71-3f5d2b8c4a10", "5B0C9A1E-8D3F-4C2A-9E71-3F5D2B8C4A10"],
  uri: ["https://example.com/a", "http://127.0.0.1:9/x", "ftp://x", "https://ex ample.com"],
  "date-time": ["2026-11-21T08:30:00.123Z", "2026-02-30T25:61:00Z", "0000-01-01T00:00:00Z"],
  date: ["2026-11-21", "2026-13-40"],
  email: ["a@example.com", "a@", "@b"],
  hostname: ["cdn.example.com", "localhost", "127.0.0.1", "a..b", "-x-.com"],
  ipv4: ["203.0.113.250", "10.0.0.1", "999.1.1.1"],
};

const typesOf = (schema: JsonSchema): string[] =>
  schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type];

/** JSON text for a value of `schema`: mostly of the right kind (to reach deeper code), sometimes hostile. */
function valueText(schema: JsonSchema | undefined, depth = 0): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: validishText(schema ?? {}, depth) },
    { weight: 2, arbitrary: hostileValueText },
  );
}

function validishText(schema: JsonSchema, depth: number): fc.Arbitrary<string> {
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches && branches.length > 0)
    return fc.oneof(...branches.map((branch) => validishText(branch, depth)));
  if (schema.enum && schema.enum.length > 0) return fc.constantFrom(...schema.enum.map(json));
  if (schema.const !== undefined) return fc.constant(json(schema.const));
  const choices: fc.Arbitrary<string>[] = [];
  for (const type of typesOf(schema)) {
    switch (type) {
      case "string":
        choices.push(
          schema.format && FORMAT_EXAMPLES[schema.format]
            ? fc.constantFrom(...(FORMAT_EXAMPLES[schema.format] ?? [])).map(json)
            : fc.string({ maxLength: 30 }).map(json),
        );
        break;
      case "integer":
        choices.push(
          fc
            .oneof(fc.integer({ min: -5, max: 1000 }), fc.constantFrom(2 ** 31, 2 ** 53, -(2 ** 53)))
            .map(String),
        );
        break;
      case "number":
        choices.push(fc.double({ noNaN: true, noDefaultInfinity: true }).map(json));
        break;
      case "boolean":
        choices.push(fc.boolean().map(json));
        break;
      case "null":
        choices.push(fc.constant("null"));
        break;
      case "array":
        choices.push(
          depth > 3
            ? fc.constant("[]")
            : fc
                .array(valueText(schema.items, depth + 1), { maxLength: 4 })
                .map((items) => `[${items.join(",")}]`),
        );
        break;
      case "object":
        choices.push(depth > 3 ? fc.constant("{}") : objectText(schema, depth + 1));
        break;
    }
  }
  return choices.length > 0 ? fc.oneof(...choices) : hostileValueText;
}

/**
 * An object's text built member by member, so it can hold what JSON.stringify never writes:
 * duplicate keys and prototype keys next to the schema's own fields.
 */
function objectText(schema: JsonSchema, depth: number): fc.Arbitrary<string> {
  const names = Object.keys(schema.properties ?? {});
  const member = names.length
    ? fc
        .constantFrom(...names)
        .chain((name) => valueText(schema.properties?.[name], depth).map((v) => [name, v]))
    : fc.tuple(fc.string({ maxLength: 8 }), hostileValueText);
  const oddMember = fc.tuple(
    fc.constantFrom("__proto__", "constructor", "prototype", "", "\u0000", "a\ud800", "unexpected_field"),
    hostileValueText,
  );
  return fc
    .tuple(
      fc.array(member, { maxLength: Math.min(names.length + 2, 10) }),
      fc.array(oddMember, { maxLength: 2 }),
      fc.boolean(),
    )
    .map(([members, odd, duplicateFirst]) => {
      const all = [...members, ...odd];
      if (duplicateFirst && all[0]) all.push([all[0][0], hostileStringValue(all[0][1])]);
      return `{${all.map(([name, value]) => `${json(name)}:${value}`).join(",")}}`;
    });
}

/** A second, different value for a duplicated key. */
const hostileStringValue = (value: string): string => (value === '"dup"' ? "1" : '"dup"');

// ---------------------------------------------------------------------------------------------
// Bodies

const utf8 = (text: string) => Buffer.from(text, "utf8");

const INVALID_UTF8 = [
  Buffer.from([0xff]),
  Buffer.from([0xc0, 0xaf]),
  Buffer.from([0xed, 0xa0, 0x80]),
  Buffer.from([0xf8, 0x88, 0x80, 0x80, 0x80]),
  Buffer.from([0xe2, 0x82]),
];

/** Mutations applied to well-formed JSON text. */
const jsonMutation = fc.oneof(
  { weight: 10, arbitrary: fc.constant((text: string) => utf8(text)) },
  {
    weight: 1,
    arbitrary: fc
      .nat()
      .map((at) => (text: string) => utf8(text.slice(0, text.length ? at % text.length : 0))),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.nat(), fc.constantFrom(...INVALID_UTF8)).map(([at, bytes]) => (text: string) => {
      const whole = utf8(text);
      const cut = whole.length ? at % whole.length : 0;
      return Buffer.concat([whole.subarray(0, cut), bytes, whole.subarray(cut)]);
    }),
  },
  {
    weight: 1,
    arbitrary: fc.constant((text: string) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8(text)])),
  },
  { weight: 1, arbitrary: fc.constant((text: string) => utf8(`${text}}garbage`)) },
  { weight: 1, arbitrary: fc.constant((text: string) => utf8(`[${text}]`)) },
);

const JSON_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=UTF-16",
  'application/json; charset="latin1"',
  "application/json;charset=utf8",
];
const OTHER_TYPES = [
  undefined,
  "text/plain",
  "application/xml",
  "application/x-www-form-urlencoded",
  "application/octet-stream",
  "video/mp4",
  "multipart/form-data",
  "multipart/form-data; boundary=",
  "application/json-patch+json",
  "*/*",
  ";;;",
];

interface MultipartPart {
  name: string;
  filename?: string;
  content: string;
}

const BOUNDARY = "fuzzBoundary7MA4YWxkTrZu0gW";

function multipartText(parts: MultipartPart[], boundary = BOUNDARY, close = true): string {
  const body = parts
    .map(
      (part) =>
        `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"${
          part.filename !== undefined ? `; filename="${part.filename}"` : ""
        }\r\n\r\n${part.content}\r\n`,
    )
    .join("");
  return close ? `${body}--${boundary}--\r\n` : body;
}

const FILE_CONTENTS = [
  "WEBVTT\n\n00:00.000 --> 00:01.000\nhello\n",
  "1\n00:00:00,000 --> 00:00:01,000\nhello\n",
  "\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
  "",
  "not a file at all",
];

/** A multipart body for `fields` (the operation's own), well formed or broken in one of many ways. */
function multipartBody(fields: string[]): fc.Arbitrary<{ contentType: string; body: Buffer }> {
  const fieldPart = fc.record({
    name: fc.constantFrom(...fields, "__proto__", "x"),
    content: fc.oneof(hostileString, fc.constantFrom("en", "English", "de-DE", "Title")),
  });
  const filePart = fc.record({
    name: fc.constantFrom("file", "file", "file", ...fields),
    filename: fc.constantFrom("a.vtt", "a.srt", "cover.png", "../../x.png", "", "a\u0000.vtt"),
    content: fc.constantFrom(...FILE_CONTENTS),
  });
  // A form as the operation expects it: its text fields, then (usually) the file.
  const form = fc
    .tuple(fc.array(fieldPart, { maxLength: 4 }), fc.option(filePart, { freq: 4 }))
    .map(([texts, file]) => (file ? [...texts, file] : texts));
  const type = `multipart/form-data; boundary=${BOUNDARY}`;
  const as = (text: string) => ({ contentType: type, body: utf8(text) });
  return fc.oneof(
    { weight: 3, arbitrary: form.map((parts) => as(multipartText(parts))) },
    // No closing delimiter.
    { weight: 2, arbitrary: form.map((parts) => as(multipartText(parts, BOUNDARY, false))) },
    // Cut anywhere in its second half: inside the file, a delimiter or a part's headers.
    {
      weight: 3,
      arbitrary: fc.tuple(form, fc.double({ min: 0.5, max: 1, noNaN: true })).map(([parts, at]) => {
        const whole = multipartText(parts);
        return as(whole.slice(0, Math.floor(whole.length * at)));
      }),
    },
    // Delimiters that do not match the declared boundary.
    { weight: 1, arbitrary: form.map((parts) => as(multipartText(parts, "someOtherBoundary"))) },
    // Thousands of parts.
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(50, 3_000)
        .map((count) =>
          as(multipartText(Array.from({ length: count }, (_, i) => ({ name: `f${i}`, content: "v" })))),
        ),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(
          `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.vtt"\r\n${"X-Pad: y\r\n".repeat(5000)}\r\nWEBVTT\r\n--${BOUNDARY}--\r\n`,
          `--${BOUNDARY}\r\nno headers at all\r\n--${BOUNDARY}--\r\n`,
          `--${BOUNDARY}--\r\n`,
          `--${BOUNDARY}\r\nContent-Disposition: form-data\r\n\r\nnameless\r\n--${BOUNDARY}--\r\n`,
          "",
        )
        .map(as),
    },
  );
}

/** A form field's value: text as a form carries it (a JSON string's own text, anything else as JSON text). */
const asFormValue = (text: string): string => {
  // Deeply nested text is sent as it is (JSON.parse would only give it back).
  if (!text.startsWith('"')) return text;
  const value = JSON.parse(text) as unknown;
  return typeof value === "string" ? value : text;
};

/** Depths of bracket paths, around CUMULO_MAX_JSON_DEPTH's default (64) and far past it. */
const BRACKET_DEPTHS = [2, 3, 63, 64, 65, 200, 20_000];

/** Text a store cannot keep, as JSON escapes: it exists only once a field's JSON text is parsed. */
const UNSTORABLE_ESCAPES = ["a\\u0000b", "\\ud800", "k\\udc00y"];

/**
 * JSON text for a form field that takes a list or an object: of its schema, nested past any depth
 * limit, or holding escaped text no store can keep (in an item, or in an item's field).
 */
function jsonTextFieldValue(schema: JsonSchema): fc.Arbitrary<string> {
  const itemFields = Object.keys(schema.items?.properties ?? schema.properties ?? {});
  const escaped = fc
    .tuple(fc.constantFrom(...UNSTORABLE_ESCAPES), fc.constantFrom(...itemFields, ""))
    .map(([text, field]) => {
      const value = field ? `{${json(field)}:"${text}"}` : `"${text}"`;
      return schema.items || !field ? `[${value}]` : value;
    });
  return fc.oneof(
    validishText(schema, 1),
    nestedText.map((text) => (schema.items ? `[${text}]` : `{"a":${text}}`)),
    escaped,
  );
}

/**
 * Form fields (name and value) for a body schema, as the cloud API reads forms (src/cloud/coerce.ts):
 * plain fields with text of their type or hostile text, lists of objects as JSON text in the field
 * (valid, hostile, nested, with escaped NUL) or in bracket paths (`rules[0][port]`, `rules[][port]`,
 * deep and prototype paths), `name[]` lists and repeated keys.
 */
function formFieldsFor(schema: JsonSchema): fc.Arbitrary<[string, string][]> {
  const properties = schema.properties ?? {};
  const names = Object.keys(properties);
  const anyName = fc.constantFrom(...names, "x");
  const plain = anyName.chain((name) => {
    const schemaOf = properties[name] ?? {};
    const takesJsonText = typesOf(schemaOf).some((type) => type === "array" || type === "object");
    return fc.tuple(
      fc.constantFrom(name, `${name}[]`),
      fc.oneof(
        { weight: 3, arbitrary: valueText(schemaOf, 1).map(asFormValue) },
        { weight: takesJsonText ? 3 : 0, arbitrary: jsonTextFieldValue(schemaOf) },
        { weight: 1, arbitrary: hostileString },
        { weight: 1, arbitrary: fc.constantFrom("True", "FALSE", "1", "0", "007", "1.0", "-0", "") },
      ),
    );
  });
  // Lists of objects: their items' fields in brackets.
  const lists = names.filter((name) => properties[name]?.items?.properties);
  const bracketed = lists.length
    ? fc.constantFrom(...lists).chain((name) => {
        const itemFields = properties[name]?.items?.properties ?? {};
        return fc
          .tuple(
            fc.constantFrom("0", "1", "", "9999", "10000", "-1", "a", "__proto__"),
            fc.constantFrom(...Object.keys(itemFields), "x", "__proto__", "constructor"),
          )
          .chain(([index, field]) =>
            valueText(itemFields[field], 2)
              .map(asFormValue)
              .map((value): [string, string] => [`${name}[${index}][${field}]`, value]),
          );
      })
    : plain;
  const deep = fc
    .tuple(
      fc.constantFrom(...names, "x"),
      fc.constantFrom(...BRACKET_DEPTHS),
      fc.constantFrom("[0]", "[a]", "[]"),
    )
    .map(([name, depth, step]): [string, string] => [`${name}${step.repeat(depth)}`, "1"]);
  const odd = fc.tuple(
    fc.constantFrom(
      "__proto__[admin]",
      "constructor[prototype][admin]",
      "a[",
      "a]",
      "[0]",
      "a[b]c",
      "\u0000",
      "",
    ),
    hostileString,
  );
  return fc
    .array(
      fc.oneof(
        { weight: 4, arbitrary: plain },
        { weight: 3, arbitrary: bracketed },
        { weight: 1, arbitrary: deep },
        { weight: 1, arbitrary: odd },
      ),
      { maxLength: 8 },
    )
    .chain((pairs) =>
      // A key given again, with another value.
      fc
        .boolean()
        .map((repeat) => (repeat && pairs[0] ? [...pairs, [pairs[0][0], "1"] as [string, string]] : pairs)),
    );
}

/** A form-urlencoded body of `formFieldsFor`, encoded as a browser would or with raw, broken escapes. */
function formBodyFor(schema: JsonSchema): fc.Arbitrary<{ contentType: string; body: Buffer }> {
  const encoded = formFieldsFor(schema).map((pairs) => new URLSearchParams(pairs).toString());
  const raw = fc
    .tuple(encoded, fc.constantFrom("&%00=%00", "&a=%ED%A0%80", "&%zz=%", "&&&=&", "&a=b=c", "&+=+"))
    .map(([text, tail]) => `${text}${tail}`);
  return fc
    .tuple(
      fc.oneof({ weight: 4, arbitrary: encoded }, { weight: 1, arbitrary: raw }),
      fc.constantFrom(
        "application/x-www-form-urlencoded",
        "application/x-www-form-urlencoded; charset=utf-8",
        "APPLICATION/X-WWW-FORM-URLENCODED",
        "application/x-www-form-urlencoded; charset=latin1",
      ),
    )
    .map(([text, contentType]) => ({ contentType, body: utf8(text) }));
}

function bodyFor(operation: Operation): fc.Arbitrary<{ contentType: string | undefined; body: Buffer }> {
  const fields = Object.keys(operation.bodySchema?.properties ?? {});
  const jsonBody = fc
    .tuple(
      fc.oneof(
        { weight: 6, arbitrary: validishText(operation.bodySchema ?? { type: "object" }, 0) },
        { weight: 2, arbitrary: hostileValueText },
        { weight: 1, arbitrary: fc.constantFrom("", " ", '{"a":', "\u0000", "{}{}") },
      ),
      jsonMutation,
      fc.oneof(
        { weight: 6, arbitrary: fc.constant("application/json") },
        { weight: 2, arbitrary: fc.constantFrom(...JSON_TYPES) },
      ),
    )
    .map(([text, mutate, contentType]) => ({ contentType, body: mutate(text) }));
  const formBody = formBodyFor(operation.bodySchema ?? {});
  const otherBody = fc
    .tuple(fc.constantFrom(...OTHER_TYPES), hostileString)
    .map(([contentType, text]) => ({ contentType, body: utf8(text) }));
  const takesMultipart = operation.bodyTypes.includes("multipart/form-data");
  const takesForm = operation.bodyTypes.includes("application/x-www-form-urlencoded");
  return fc.oneof(
    { weight: takesMultipart ? 2 : 6, arbitrary: jsonBody },
    { weight: takesMultipart ? 6 : 1, arbitrary: multipartBody(fields) },
    { weight: takesForm ? 5 : 1, arbitrary: formBody },
    { weight: 1, arbitrary: otherBody },
  );
}

// ---------------------------------------------------------------------------------------------
// Parameters

const HOSTILE_IDS = [
  "not-a-uuid",
  "00000000-0000-0000-0000-000000000000",
  "..%2F..%2Fetc",
  "%00",
  "%ED%A0%80",
  "%zz",
  "9".repeat(300),
  "0.0.0.0",
  "::1",
  "%2e%2e",
];

const HOSTILE_QUERY = [
  "%00",
  "%ED%A0%80",
  "%zz",
  "%",
  "1e309",
  "-1",
  "0",
  "99999999999999999999",
  "",
  "a%20b",
  "%F0%9F%98%80",
];

function pathFor(operation: Operation, known: Record<string, string>): fc.Arbitrary<string> {
  const names = [...operation.path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1] ?? "");
  const parameterValue = (name: string): fc.Arbitrary<string> => {
    const schema = operation.parameters.find((p) => p.in === "path" && p.name === name)?.schema;
    const usual =
      // The shared library and video stay: deletes get ids that name nothing.
      (operation.method === "DELETE" ? undefined : known[name]) ??
      (name === "location"
        ? "local-1"
        : schema?.format === "uuid"
          ? "5b0c9a1e-8d3f-4c2a-9e71-3f5d2b8c4a10"
          : schema?.format === "ipv4" || /address/i.test(name)
            ? "203.0.113.250"
            : // Deleting key "1" would revoke the fuzzer's own key.
              operation.method === "DELETE"
              ? "999999"
              : "1");
    return fc.oneof(
      { weight: 12, arbitrary: fc.constant(usual) },
      { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_IDS) },
      { weight: 1, arbitrary: hostileString.map(percentEncoded).map((text) => text.slice(0, 2000)) },
    );
  };
  return fc
    .tuple(...names.map(parameterValue))
    .map((values) =>
      names.reduce((path, name, i) => path.replace(`{${name}}`, values[i] ?? ""), operation.path),
    );
}

function queryFor(operation: Operation): fc.Arbitrary<string> {
  const parameters = operation.parameters.filter((p) => p.in === "query");
  if (parameters.length === 0) return fc.constantFrom("", "?unknown=1", "?%00=%00");
  const pair = fc.constantFrom(...parameters).chain((parameter) =>
    fc
      .oneof(
        validishText(parameter.schema ?? { type: "string" }, 3).map((text) => {
          // Not stringified again: a deeply nested value overflows JSON.stringify's stack.
          const value = JSON.parse(text) as unknown;
          return percentEncoded(typeof value === "string" ? value : text);
        }),
        fc.constantFrom(...HOSTILE_QUERY),
        hostileString.map((text) => percentEncoded(text.slice(0, 3000))),
      )
      .map((value) => `${parameter.name}=${value}`),
  );
  return fc.array(pair, { maxLength: 4 }).map((pairs) => (pairs.length ? `?${pairs.join("&")}` : ""));
}

/** Header values no well-behaved client sends: huge, negative or odd numbers, broken lists, long text. */
const HOSTILE_HEADER_VALUES = [
  "",
  " ",
  "-1",
  "1e3",
  "0x10",
  "+5",
  " 5 ",
  "99999999999999999999999",
  "9007199254740993",
  "1.5",
  "1,2",
  "abc",
  "\u00ff\u00fe",
  "x".repeat(8_000),
  "a,b,,c",
  "=",
  "%00",
];

/** Values for the `Upload-Metadata` of tus: pairs of a key and base64, well formed or not. */
const UPLOAD_METADATA = [
  "filename dGVzdC5tcDQ=",
  "library_id ,video_id ",
  "filename",
  "filename !!!notbase64",
  "filename /w==",
  "a YQ==,a YQ==",
  ",,,",
  "key with spaces YQ==",
  Array.from({ length: 500 }, (_, i) => `k${i} YQ==`).join(","),
];

/** Headers a route reads, with usual values or hostile ones. */
const COMMON_HEADERS = {
  range: ["bytes=0-0", "bytes=-5", "bytes=5-1", "bytes=999999999999999999999-", "items=0-1", "bytes="],
  "if-none-match": ['"v1"', "*", 'W/"x"', "garbage", '"a", "b"'],
  "if-modified-since": ["Mon, 23 Nov 2026 10:00:00 GMT", "garbage", "0"],
  "if-range": ['"v1"', "garbage"],
  accept: ["application/json", "text/html", "*/*;q=0", "x".repeat(3_000)],
  "accept-encoding": ["gzip", "br;q=0, identity;q=0", "*;q=0", "x".repeat(3_000)],
  "accept-language": ["de-DE", "*", ";;;"],
  cookie: ["cumulo_session=x", "cumulo_session=", "a=b; a=c", "=;=;=", `cumulo_session=${"x".repeat(5_000)}`],
  "x-request-id": ["", "x".repeat(5_000), "a b\u00ff"],
  "x-forwarded-for": ["203.0.113.1", "garbage, , ::1", "1.2.3.4".repeat(500)],
  "x-forwarded-host": ["evil.example", ""],
  origin: ["https://evil.example", "null"],
  "content-encoding": ["identity", "gzip", "x"],
  "tus-resumable": ["1.0.0", "0.2.2", ""],
  "upload-length": ["1", "0", ...HOSTILE_HEADER_VALUES.slice(0, 12)],
  "upload-offset": ["0", ...HOSTILE_HEADER_VALUES.slice(0, 12)],
  "upload-defer-length": ["1", "0", "true"],
  "upload-metadata": UPLOAD_METADATA,
} satisfies Record<string, string[]>;

/** A value for a header parameter the operation declares, of its schema or hostile. */
function headerValue(name: string, schema: JsonSchema | undefined): fc.Arbitrary<string> {
  const known = COMMON_HEADERS[name.toLowerCase() as keyof typeof COMMON_HEADERS];
  return fc.oneof(
    {
      weight: 3,
      arbitrary: known ? fc.constantFrom(...known) : validishText(schema ?? {}, 3).map(asFormValue),
    },
    { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_HEADER_VALUES) },
  );
}

/** Extra headers: the operation's declared header parameters and the ones any route may read. */
function headersFor(operation: Operation): fc.Arbitrary<Record<string, string>> {
  const declared = operation.parameters.filter((parameter) => parameter.in === "header");
  const declaredHeaders = declared.length
    ? fc.record(
        Object.fromEntries(
          declared.map((parameter) => [
            parameter.name.toLowerCase(),
            headerValue(parameter.name, parameter.schema),
          ]),
        ),
        { requiredKeys: [] },
      )
    : fc.constant({});
  const common = fc.record(
    Object.fromEntries(
      Object.entries(COMMON_HEADERS).map(([name, values]) => [name, fc.constantFrom(...values)]),
    ),
    { requiredKeys: [] },
  );
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant({}) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(declaredHeaders, fc.option(common, { freq: 2 }))
        // A few of the common ones at a time, so each still reaches its route's code.
        .map(([own, more]) => ({ ...Object.fromEntries(Object.entries(more ?? {}).slice(0, 3)), ...own })),
    },
  );
}

/** Forms of credentials other than the one the group expects. */
const ODD_CREDENTIALS = (adminKey: string): Record<string, string>[] => [
  {},
  { authorization: "Bearer \u00ff" },
  { "x-api-key": "x".repeat(500) },
  { authorization: `Basic ${Buffer.from(`${adminKey}:`).toString("base64")}` },
  { authorization: `Bearer  ${adminKey} ` },
  { authorization: `bearer ${adminKey}, Bearer ${adminKey}` },
  { authorization: "Bearer" },
  { authorization: `Bearer ${"x".repeat(8_000)}` },
  { apikey: "" },
  { apikey: `${adminKey}\u00ff` },
  { authorization: `Bearer ${adminKey}`, apikey: "wrong" },
  { cookie: `cumulo_session=${adminKey}` },
];

function requestFor(
  operation: Operation,
  known: Record<string, string>,
  adminKey: string,
): fc.Arbitrary<FuzzRequest> {
  const cloud = isCloudPath(operation.path);
  const credentials: fc.Arbitrary<Record<string, string>> = fc.oneof(
    {
      weight: 12,
      arbitrary: fc.constant<Record<string, string>>(
        cloud ? { apikey: adminKey } : { authorization: `Bearer ${adminKey}` },
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom(...ODD_CREDENTIALS(adminKey)) },
  );
  const hasBody = !["GET", "DELETE", "HEAD", "OPTIONS", "TRACE"].includes(operation.method);
  const body = hasBody
    ? bodyFor(operation)
    : fc.oneof(
        { weight: 8, arbitrary: fc.constant({ contentType: undefined, body: Buffer.alloc(0) }) },
        { weight: 1, arbitrary: bodyFor(operation) },
      );
  return fc
    .record({
      method: fc.constantFrom(...(operation.undeclared ?? [operation.method])),
      path: pathFor(operation, known),
      query: queryFor(operation),
      credentials,
      extraHeaders: headersFor(operation),
      body,
      missingBytes: fc.oneof(
        { weight: 20, arbitrary: fc.constant(0) },
        { weight: 1, arbitrary: fc.constantFrom(1, 1000) },
      ),
    })
    .map(({ method, path, query, credentials, extraHeaders, body, missingBytes }) => ({
      method,
      target: `${path}${query}`,
      headers: {
        ...extraHeaders,
        ...credentials,
        ...(body.contentType !== undefined ? { "content-type": body.contentType } : {}),
      },
      body: body.body,
      missingBytes,
    }));
}

// ---------------------------------------------------------------------------------------------
// Sending and judging

/**
 * Sends one request on its own connection. A body shorter than its declared length is followed by
 * the end of the client's side, as a client that gives up would do.
 */
async function send(
  baseUrl: string,
  request: FuzzRequest,
  host = "localhost",
): Promise<RawAnswer | undefined> {
  const head = [
    `${request.method} ${request.target} HTTP/1.1`,
    `Host: ${host}`,
    "Connection: close",
    ...Object.entries(request.headers).map(([name, value]) => `${name}: ${value}`),
    ...(request.body.length > 0 || request.method !== "GET"
      ? [`Content-Length: ${request.body.length + request.missingBytes}`]
      : []),
  ].join("\r\n");
  const connection = await RawConnection.open(baseUrl);
  try {
    connection.write(Buffer.concat([Buffer.from(`${head}\r\n\r\n`, "latin1"), request.body]));
    if (request.missingBytes > 0) connection.socket.end();
    return await connection.answer(ANSWER_TIMEOUT_MS);
  } finally {
    connection.close();
  }
}

function isContractErrorBody(path: string, status: number, body: unknown): boolean {
  if (typeof body !== "object" || body === null) return false;
  const record = body as Record<string, unknown>;
  if (isCloudPath(path)) {
    if (status === 401 || status === 403 || status === 429) {
      return typeof record.error === "string" && typeof record.message === "string";
    }
    return typeof record.message === "string";
  }
  if (status === 401 || status === 403 || status === 429) {
    return record.success === false && typeof record.error === "string" && typeof record.message === "string";
  }
  return record.success === false && typeof record.message === "string";
}

/** Why an answer to a request for the operation at `path` breaks the rules, or undefined when it keeps them. */
function judge(
  operation: Operation,
  request: FuzzRequest,
  answer: RawAnswer | undefined,
  newErrors: string[],
): string | undefined {
  if (newErrors.length > 0) return `logged at error level: ${newErrors.join(" | ")}`;
  if (!answer) {
    // A client that stopped sending mid-body may find the connection closed: that is an answer.
    return request.missingBytes > 0 ? undefined : "connection closed without an answer";
  }
  if (answer.status >= 500) return `${answer.status} ${answer.body.slice(0, 300)}`;
  // A HEAD answer has no body; tus's own refusals are plain text, as the document says.
  if (answer.status >= 400 && request.method !== "HEAD" && !operation.textStatuses.includes(answer.status)) {
    let body: unknown;
    try {
      body = JSON.parse(answer.body);
    } catch {
      body = answer.body;
    }
    if (!isContractErrorBody(operation.path, answer.status, body)) {
      return `${answer.status} not in the contract's error shape: ${answer.body.slice(0, 300)}`;
    }
  }
  return undefined;
}

const describeRequest = (request: FuzzRequest): string =>
  `${request.method} ${request.target.slice(0, 200)} ${JSON.stringify(request.headers)} body(${request.body.length}${
    request.missingBytes ? `, ${request.missingBytes} promised more` : ""
  }): ${JSON.stringify(request.body.subarray(0, 200).toString("latin1"))}`;

// ---------------------------------------------------------------------------------------------

describe("fuzzing every operation of the OpenAPI document", () => {
  let t: TestApp;
  let provider: Server;
  let origin: Server;
  let edgeUrl: string;
  let distributionHost: string;
  const known: Record<string, string> = {};
  const { logger, lines } = capturingLogger();

  beforeAll(async () => {
    // Migration providers refuse every token, so no request depends on the outside world.
    provider = createServer((_req, res) =>
      res.writeHead(401, { "content-type": "application/json" }).end("{}"),
    );
    await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
    const providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
    // The edge's origin: small answers with validators, so Range and conditional requests apply.
    origin = createServer((req, res) => {
      res.writeHead(req.url?.includes("missing") ? 404 : 200, {
        "content-type": "text/plain",
        // Marks answers passed through from the origin, which keep the origin's body.
        "x-from-origin": "1",
        "cache-control": "public, max-age=60",
        etag: '"v1"',
        "last-modified": "Mon, 23 Nov 2026 10:00:00 GMT",
      });
      res.end("0123456789".repeat(20));
    });
    await new Promise<void>((resolve) => origin.listen(0, "127.0.0.1", resolve));
    const providers = ["VIMEO", "WISTIA", "YOUTUBE", "DAILYMOTION", "CLOUDFLARE"];
    t = await startTestApp(
      {
        CUMULO_RATE_LIMIT: "1000000/1m",
        CUMULO_EDGE_PORT: "0",
        CUMULO_ORIGIN_ALLOW_PRIVATE: "true",
        CUMULO_MAX_CONCURRENT_UPLOADS: "1000",
        ...Object.fromEntries(providers.map((name) => [`CUMULO_PROVIDER_${name}_URL`, providerUrl])),
      },
      { logger },
    );
    edgeUrl = t.cumulo.edgeUrl ?? "";
    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "Fuzzed" } })).body.data;
    const video = (
      await t.request("POST", `/v1/media/libraries/${library.id}/videos`, { json: { title: "v" } })
    ).body.data;
    known.libraryId = library.id;
    known.videoId = video.id;
    distributionHost = `fuzz-${Date.now()}.example.com`;
    const distribution = await t.request("POST", "/v1/cdn/distributions", {
      json: {
        hostname: distributionHost,
        origin_url: `http://127.0.0.1:${(origin.address() as AddressInfo).port}/`,
      },
    });
    expect(distribution.status).toBe(201);
  });
  afterAll(async () => {
    await t.close();
    provider.close();
    origin.close();
  });

  it(
    "answers every generated request to every operation with a non-5xx in the contract's shape, promptly, logging no error",
    async () => {
      const document = (await t.request("GET", "/openapi.json", { anonymous: true })).body;
      const operations = operationsOf(document);
      expect(operations.length).toBeGreaterThan(100);
      for (const [index, operation] of operations.entries()) {
        await fc.assert(
          fc.asyncProperty(requestFor(operation, known, t.adminKey), async (request) => {
            const before = lines.length;
            const answer = await send(t.baseUrl, request);
            const failure = judge(operation, request, answer, errorLines(lines.slice(before)));
            if (failure)
              throw new Error(
                `${operation.method} ${operation.path}: ${failure}\n  request: ${describeRequest(request)}`,
              );
          }),
          // Uploads stream their bodies through more code of our own: they get more runs.
          {
            seed: SEED + index,
            numRuns: operation.bodyTypes.includes("multipart/form-data") ? RUNS * 4 : RUNS,
          },
        );
        // A request that disabled the fuzzer's own key would leave every later operation fuzzed
        // only up to its 401: the key must still open both groups.
        const media = await t.request("GET", "/v1/media/libraries");
        const cloud = await t.cloud("GET", "/v1/user-resource/vm/list");
        expect(
          [media.status, cloud.status],
          `key still accepted after ${operation.method} ${operation.path}`,
        ).toEqual([200, 200]);
      }
      expect(errorLines(lines)).toEqual([]);
      const health = await t.request("GET", "/healthz", { anonymous: true });
      expect(health.status).toBe(200);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "answers every generated request to the edge with a non-5xx in its plain shape, promptly, logging no error",
    async () => {
      const edgeStart = lines.length;
      const hostArb = fc.oneof(
        { weight: 4, arbitrary: fc.constant(distributionHost) },
        {
          weight: 3,
          arbitrary: fc.constantFrom(
            distributionHost.toUpperCase(),
            `${distributionHost}.`,
            `${distributionHost}:8081`,
            "localhost",
            "127.0.0.1",
            "[::1]",
            "[::1",
            "",
            "unknown.example.com",
            "x".repeat(300),
            "a b",
            "ünïcode.example",
            `${known.libraryId}.media.cumulo.local`,
            "..",
          ),
        },
      );
      const pathArb = fc.oneof(
        fc.constantFrom("/", "/file.txt", "/a/b/c.m3u8", "/missing", "//double", "/file.txt?x=1&x=2"),
        fc.constantFrom(
          "/%2e%2e/%2e%2e/etc/passwd",
          "/..%2f..%2fetc",
          "/%00",
          "/%ED%A0%80",
          "/%c0%af",
          "/%zz",
          "/%",
          `/${"a".repeat(5000)}`,
          "/\u00ff",
          "*",
          "http://evil.example/x",
          `/${distributionHost}/file.txt`,
          `/${known.libraryId}.media.cumulo.local/${known.videoId}/playlist.m3u8`,
        ),
        fc.string({ unit: "binary-ascii", maxLength: 30 }).map((text) => `/${percentEncoded(text)}`),
      );
      const headerArb = fc.record(
        {
          range: fc.constantFrom(
            "bytes=0-0",
            "bytes=-5",
            "bytes=5-",
            "bytes=5-1",
            "bytes=0-0,2-3",
            "bytes=999999999999999999999-",
            "bytes=-0",
            "bytes=",
            "items=0-1",
            "bytes=0-1, 1-2, 0-",
            "garbage",
          ),
          "if-none-match": fc.constantFrom('"v1"', "*", 'W/"v1"', '"other"', "garbage", '"v1", "v2"'),
          "if-match": fc.constantFrom('"v1"', "*", "garbage"),
          "if-modified-since": fc.constantFrom(
            "Mon, 23 Nov 2026 10:00:00 GMT",
            "Thu, 01 Jan 2099 00:00:00 GMT",
            "garbage",
            "",
          ),
          "if-unmodified-since": fc.constantFrom("Mon, 01 Jan 1990 00:00:00 GMT", "garbage"),
          "if-range": fc.constantFrom('"v1"', 'W/"v1"', "Mon, 23 Nov 2026 10:00:00 GMT", "garbage"),
          "accept-encoding": fc.constantFrom("gzip", "br;q=0", "*", "x".repeat(2000)),
          referer: fc.constantFrom("https://example.com/", "not a url", ""),
        },
        { requiredKeys: [] },
      );
      const edgeRequest = fc.record({
        method: fc.constantFrom("GET", "GET", "GET", "HEAD", "POST", "OPTIONS", "DELETE", "PURGE"),
        host: hostArb,
        target: pathArb,
        headers: headerArb,
      });
      await fc.assert(
        fc.asyncProperty(edgeRequest, async ({ method, host, target, headers }) => {
          const request: FuzzRequest = {
            method,
            target,
            headers: headers as Record<string, string>,
            body: Buffer.alloc(0),
            missingBytes: 0,
          };
          const before = lines.length;
          const answer = await send(edgeUrl, request, host);
          const newErrors = errorLines(lines.slice(before));
          let failure: string | undefined;
          if (newErrors.length > 0) failure = `logged at error level: ${newErrors.join(" | ")}`;
          else if (!answer) failure = "connection closed without an answer";
          else if (answer.status >= 500 && answer.status !== 502 && answer.status !== 504)
            failure = `${answer.status} ${answer.body.slice(0, 300)}`;
          else if (
            answer.status >= 400 &&
            method !== "HEAD" &&
            answer.headers["x-from-origin"] === undefined
          ) {
            let body: unknown;
            try {
              body = JSON.parse(answer.body);
            } catch {
              body = answer.body;
            }
            const record = body as Record<string, unknown> | null;
            if (
              typeof record !== "object" ||
              record?.success !== false ||
              typeof record.message !== "string"
            ) {
              failure = `${answer.status} not in the edge's error shape: ${answer.body.slice(0, 300)}`;
            }
          }
          if (failure)
            throw new Error(`edge: ${failure}\n  request: Host ${host} ${describeRequest(request)}`);
        }),
        { seed: SEED, numRuns: EDGE_RUNS },
      );
      expect(errorLines(lines.slice(edgeStart))).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );
});
