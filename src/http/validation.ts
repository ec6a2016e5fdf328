import { Ajv, type ErrorObject, type Options } from "ajv";
import addFormats from "ajv-formats";
import type { FastifySchemaCompiler } from "fastify";
import { isBlank, NAME_PATTERN } from "../text.ts";
import type { FieldError, ValidationCode } from "./errors.ts";
import { EXPECTED, OUT_OF_RANGE } from "./schemas.ts";

const baseOptions: Options = { allErrors: true, strict: false, useDefaults: true, removeAdditional: false };

function buildAjv(options: Options): Ajv {
  const ajv = new Ajv({ ...baseOptions, ...options });
  addFormats.default(ajv);
  return ajv;
}

// Bodies keep their JSON types (a number where a string belongs is validation_type); query strings
// and path parameters arrive as text and are coerced, repeated query keys becoming arrays. `verbose`
// puts the refused value in each error, so a list of allowed values can tell a wrong type apart
// (a query key given twice is a list where one value belongs: validation_type, as for `limit`), and
// the failing schema, whose `x-expected` words say what a pattern takes.
const bodyAjv = buildAjv({ coerceTypes: false, verbose: true });
const textAjv = buildAjv({ coerceTypes: "array", verbose: true });

// Ajv coerces any text JavaScript reads as a number (`0x10`, `1e1`, `+5`, ` 5`); a number in a query
// string or path is taken only as plain decimal text.
const DECIMAL_TEXT: Record<string, RegExp> = { integer: /^-?\d+$/, number: /^-?\d+(\.\d+)?$/ };

type NumericField = { name: string; type: string; list: boolean };

/** The top-level fields of a query or path schema that hold numbers, or lists of numbers. */
function numericFieldsOf(schema: object): NumericField[] {
  const properties = (
    schema as { properties?: Record<string, { type?: unknown; items?: { type?: unknown } }> }
  ).properties;
  const fields: NumericField[] = [];
  for (const [name, property] of Object.entries(properties ?? {})) {
    const list = property.type === "array";
    const type = String((list ? property.items?.type : property.type) ?? "");
    if (type in DECIMAL_TEXT) fields.push({ name, type, list });
  }
  return fields;
}

function notDecimalError(field: NumericField, instancePath: string): ErrorObject {
  return {
    instancePath,
    schemaPath: `#/properties/${field.name}/type`,
    keyword: "type",
    params: { type: field.type },
    message: `must be ${field.type}`,
  };
}

/** Text refused by `DECIMAL_TEXT` in the numeric fields of query or path data, before Ajv coerces it. */
function notDecimalErrors(data: unknown, fields: NumericField[]): ErrorObject[] {
  const errors: ErrorObject[] = [];
  if (typeof data !== "object" || data === null) return errors;
  for (const field of fields) {
    const value = (data as Record<string, unknown>)[field.name];
    const pattern = DECIMAL_TEXT[field.type] as RegExp;
    if (typeof value === "string") {
      if (!pattern.test(value)) errors.push(notDecimalError(field, `/${field.name}`));
    } else if (field.list && Array.isArray(value)) {
      value.forEach((item, index) => {
        if (typeof item === "string" && !pattern.test(item)) {
          errors.push(notDecimalError(field, `/${field.name}/${index}`));
        }
      });
    }
  }
  return errors;
}

/**
 * A query key given more than once arrives as a list of its values: where one value belongs, the
 * error says so (`repeated`, "must be given once"), not that the values have the wrong type.
 */
export function markRepeated(errors: ErrorObject[]): ErrorObject[] {
  for (const error of errors) {
    const oneValue = error.keyword === "enum" || (error.keyword === "type" && error.params.type !== "array");
    if (oneValue && Array.isArray(error.data)) error.params = { ...error.params, repeated: true };
  }
  return errors;
}

/** What a list's or a map's members are checked by: skipped (`boundsFirst`) when there are too many of them. */
const MEMBER_KEYWORDS: Record<string, string[]> = {
  maxItems: ["items", "prefixItems", "contains", "uniqueItems"],
  // Only a map's own keywords: beside `properties`, `additionalProperties` would change meaning.
  maxProperties: ["patternProperties", "propertyNames"],
};

/**
 * A copy of `schema` in which a list longer than its `maxItems` (or a map with more entries than its
 * `maxProperties`) is refused for its length alone: its members are checked only within the bound.
 * Ajv reports every error (`allErrors`), so a body of 250,000 empty items against a bound of 100
 * otherwise made half a million errors and an answer of tens of megabytes, seconds of the event loop
 * (QA of 4 December). The copy is only compiled; the documented schema stays as written.
 */
export function boundsFirst(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(boundsFirst);
  if (typeof schema !== "object" || schema === null) return schema;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) copy[key] = boundsFirst(value);
  for (const [bound, members] of Object.entries(MEMBER_KEYWORDS)) {
    const moved = members.filter((keyword) => keyword in copy);
    if (typeof copy[bound] !== "number" || moved.length === 0) continue;
    if (bound === "maxProperties" && "properties" in copy) continue;
    const within: Record<string, unknown> = {};
    for (const keyword of moved) {
      within[keyword] = copy[keyword];
      delete copy[keyword];
    }
    // biome-ignore lint/suspicious/noThenProperty: JSON Schema's `then`, never awaited
    const guarded = { if: { [bound]: copy[bound] }, then: within };
    // A schema that has its own condition keeps it; the guard joins it.
    if ("if" in copy) copy.allOf = [...((copy.allOf as unknown[]) ?? []), guarded];
    else Object.assign(copy, guarded);
  }
  return copy;
}

export const validatorCompiler: FastifySchemaCompiler<object> = ({ schema: documented, httpPart }) => {
  const schema = boundsFirst(documented) as object;
  if (httpPart === "body") return bodyAjv.compile(schema);
  const validate = textAjv.compile(schema);
  const fields = numericFieldsOf(schema);
  const validateText = Object.assign(
    (data: unknown) => {
      const refused = notDecimalErrors(data, fields);
      const valid = validate(data);
      if (refused.length === 0) {
        validateText.errors = validate.errors && markRepeated(validate.errors);
        return valid;
      }
      const refusedPaths = new Set(refused.map((error) => error.instancePath));
      const others = (validate.errors ?? []).filter((error) => !refusedPaths.has(error.instancePath));
      validateText.errors = markRepeated([...refused, ...others]);
      return false;
    },
    { errors: undefined as ErrorObject[] | null | undefined },
  );
  return validateText;
};

const CODE_BY_KEYWORD: Record<string, ValidationCode> = {
  required: "validation_required",
  type: "validation_type",
  enum: "validation_enum",
  const: "validation_enum",
  format: "validation_format",
  pattern: "validation_format",
  minLength: "validation_min",
  minItems: "validation_min",
  minimum: "validation_min",
  exclusiveMinimum: "validation_min",
  minProperties: "validation_min",
  maxLength: "validation_max",
  maxItems: "validation_max",
  maximum: "validation_max",
  exclusiveMaximum: "validation_max",
  maxProperties: "validation_max",
  uniqueItems: "validation_format",
};

// When one field fails several ways (a nullable union reports one error per branch), the most
// specific reason wins; a plain type mismatch is reported only when nothing better is known.
const PRECEDENCE: ValidationCode[] = [
  "validation_required",
  "validation_format",
  "validation_enum",
  "validation_min",
  "validation_max",
  "validation_mimes",
  "validation_credentials",
  "validation_type",
];

function fieldOf(error: ErrorObject, prefix: string): string {
  const segments = error.instancePath
    .split("/")
    .slice(1)
    .map((segment) => segment.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (error.keyword === "required") segments.push(String(error.params.missingProperty));
  // A key refused by `propertyNames` is reported at its own path (`headers.Bad Name`).
  if (error.propertyName !== undefined) segments.push(error.propertyName);
  const path = segments.join(".");
  return prefix && path === "" ? prefix : path;
}

/**
 * A name or title that is only white space (`NonBlankString`): refused as an empty one is. Its
 * pattern also refuses control characters, in a name that is not blank: that is its format.
 */
const refusesBlank = (error: ErrorObject): boolean =>
  error.keyword === "pattern" &&
  error.params.pattern === NAME_PATTERN &&
  typeof error.data === "string" &&
  isBlank(error.data);

/** A length, count or size bound as a sentence's end: "must be at most 65535". */
function boundOf(error: ErrorObject): string {
  if (refusesBlank(error)) return "must not be empty";
  const limit = Number(error.params.limit);
  const plural = (one: string, many = `${one}s`) => `${limit} ${limit === 1 ? one : many}`;
  switch (error.keyword) {
    case "minLength":
      return limit === 1 ? "must not be empty" : `must be at least ${plural("character")} long`;
    case "maxLength":
      return `must be at most ${plural("character")} long`;
    case "minItems":
      return limit === 1 ? "must not be empty" : `must have at least ${plural("item")}`;
    case "maxItems":
      return `must have at most ${plural("item")}`;
    case "minProperties":
      return `must have at least ${plural("entry", "entries")}`;
    case "maxProperties":
      return `must have at most ${plural("entry", "entries")}`;
    case "minimum":
      return `must be at least ${limit}`;
    case "exclusiveMinimum":
      return `must be greater than ${limit}`;
    case "maximum":
      return `must be at most ${limit}`;
    case "exclusiveMaximum":
      return `must be less than ${limit}`;
    default:
      return error.message ?? "is out of range";
  }
}

/** What the standard formats take, in words a developer reads without the JSON Schema at hand. */
const FORMAT_WORDS: Record<string, string> = {
  uuid: "a UUID such as 3f2b8c1e-5d4a-4c7b-9e2f-1a2b3c4d5e6f",
  "date-time": "an ISO 8601 timestamp such as 2026-11-21T08:30:00Z",
  date: "a date such as 2026-11-21",
  ipv4: "an IPv4 address such as 203.0.113.5",
};

/** What the refused value should have been, when its schema or its format says so. */
function expectedOf(error: ErrorObject): string | undefined {
  const annotated = (error.parentSchema as Record<string, unknown> | undefined)?.[EXPECTED];
  if (typeof annotated === "string") return annotated;
  return error.keyword === "format" ? FORMAT_WORDS[String(error.params.format)] : undefined;
}

/**
 * A refused format: "has an invalid format", then what the field takes when that is known. The first
 * sentence stays the same for every format, so a client (the console) can recognize it.
 */
function formatMessage(error: ErrorObject, field: string): string {
  if (error.keyword === "uniqueItems") {
    const [first, second] = [Number(error.params.i), Number(error.params.j)].sort((x, y) => x - y);
    return `The ${field} field must not list the same value twice (items ${first} and ${second} are equal).`;
  }
  const expected = expectedOf(error);
  return expected
    ? `The ${field} field has an invalid format. It must be ${expected}.`
    : `The ${field} field has an invalid format.`;
}

function messageOf(error: ErrorObject, field: string, code: ValidationCode): string {
  switch (code) {
    case "validation_required":
      return `The ${field} field is required.`;
    case "validation_type":
      return `The ${field} field must be of type ${String(error.params.type).replaceAll(",", " or ")}.`;
    case "validation_enum": {
      const allowed = (error.params.allowedValues ?? [error.params.allowedValue]) as unknown[];
      return `The ${field} field must be one of: ${allowed.map(String).join(", ")}.`;
    }
    case "validation_format":
      return formatMessage(error, field);
    case "validation_min":
    case "validation_max": {
      const instead = (error.parentSchema as Record<string, unknown> | undefined)?.[OUT_OF_RANGE];
      return `The ${field} field ${typeof instead === "string" ? instead : boundOf(error)}.`;
    }
    default:
      return `The ${field} field is invalid.`;
  }
}

const jsonType = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "array" : typeof value;

/**
 * The JSON types of a list's allowed values when the refused value has none of them (a number for a
 * list of strings): the contract calls that a wrong type, not a value outside the list.
 */
function typesMissedByEnum(error: ErrorObject): string[] | undefined {
  if ((error.keyword !== "enum" && error.keyword !== "const") || !("data" in error)) return undefined;
  const allowed = (error.params.allowedValues ?? [error.params.allowedValue]) as unknown[];
  const types = [...new Set(allowed.map(jsonType))];
  return types.includes(jsonType(error.data)) ? undefined : types;
}

function fieldErrorOf(error: ErrorObject, field: string): FieldError | undefined {
  if (error.params.repeated) {
    return { field, code: "validation_type", message: `The ${field} field must be given once.` };
  }
  const missedTypes = typesMissedByEnum(error);
  if (missedTypes) {
    const message = `The ${field} field must be of type ${missedTypes.join(" or ")}.`;
    return { field, code: "validation_type", message };
  }
  const code = refusesBlank(error) ? "validation_min" : CODE_BY_KEYWORD[error.keyword];
  return code && { field, code, message: messageOf(error, field, code) };
}

/** Turns Ajv errors into the contract's field errors: one per failing field, all fields at once. */
export function toFieldErrors(errors: ErrorObject[], prefix = ""): FieldError[] {
  const byField = new Map<string, FieldError>();
  // Every type a field may have: a nullable field reports one type error per branch.
  const typesByField = new Map<string, Set<string>>();
  for (const error of errors) {
    const field = fieldOf(error, prefix);
    if (error.keyword === "type") {
      const types = typesByField.get(field) ?? new Set<string>();
      for (const type of String(error.params.type).split(",")) types.add(type);
      typesByField.set(field, types);
    }
    const fieldError = fieldErrorOf(error, field);
    if (!fieldError) continue;
    const current = byField.get(fieldError.field);
    if (current && PRECEDENCE.indexOf(current.code) <= PRECEDENCE.indexOf(fieldError.code)) continue;
    byField.set(fieldError.field, fieldError);
  }
  for (const [field, types] of typesByField) {
    const fieldError = byField.get(field);
    if (fieldError?.code === "validation_type" && types.size > 1) {
      fieldError.message = `The ${field} field must be of type ${[...types].join(" or ")}.`;
    }
  }
  // anyOf/oneOf reported without a usable branch error (a union of objects, say)
  if (byField.size === 0 && errors.length > 0) {
    const field = fieldOf(errors[0] as ErrorObject, prefix);
    byField.set(field, { field, code: "validation_type", message: `The ${field} field is invalid.` });
  }
  return [...byField.values()];
}

/** A field of a body as sent, before any schema has passed it (`fieldChecks`). */
export const bodyField = (body: unknown, field: string): unknown =>
  typeof body === "object" && body !== null && !Array.isArray(body)
    ? (body as Record<string, unknown>)[field]
    : undefined;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why no store can keep `text` as sent, if so: a NUL character or an unpaired UTF-16 surrogate. */
function unstorableReason(text: string): string | undefined {
  // PostgreSQL text cannot hold a NUL (SQLite can), and an unpaired UTF-16 surrogate cannot be
  // written as UTF-8 (stores replace it with U+FFFD): both would change the data, so both are refused.
  if (text.includes("\u0000")) return "must not contain NUL characters";
  if (LONE_SURROGATE.test(text)) return "must not contain unpaired UTF-16 surrogates";
  return undefined;
}

const unstorableError = (field: string, reason: string): FieldError => ({
  field,
  code: "validation_format",
  message: `The ${field} field ${reason}.`,
});

/**
 * Fields (or keys) of request data whose text the stores cannot keep as sent: a NUL character or
 * an unpaired surrogate, refused the same on both stores. Walks with its own stack, so any nesting
 * depth is safe; a value's path is spelled out only when it is refused, since a body of a megabyte
 * may hold hundreds of thousands of values.
 */
export function unstorableTextErrors(value: unknown, path = ""): FieldError[] {
  const errors: FieldError[] = [];
  // Each value seen: its parent's index here and its key, from which its path is rebuilt on refusal
  // (the root, at 0, is `path` itself).
  const parents: number[] = [-1];
  const keys: string[] = [""];
  const pathOf = (index: number): string => {
    const segments: string[] = [];
    for (let at = index; at > 0; at = parents[at] as number) segments.push(keys[at] as string);
    if (path) segments.push(path);
    return segments.reverse().join(".");
  };
  const pending: unknown[] = [value];
  const pendingIndexes: number[] = [0];
  while (pending.length > 0) {
    const current = pending.pop();
    const index = pendingIndexes.pop() as number;
    if (typeof current === "string") {
      const reason = unstorableReason(current);
      if (reason) errors.push(unstorableError(pathOf(index), reason));
      continue;
    }
    if (typeof current !== "object" || current === null) continue;
    const fieldNames = Object.keys(current);
    // Children go on the stack last-first, so fields are reported in the order they were sent.
    for (let position = fieldNames.length - 1; position >= 0; position--) {
      const key = fieldNames[position] as string;
      parents.push(index);
      keys.push(key);
      const reason = unstorableReason(key);
      if (reason) errors.push(unstorableError(pathOf(parents.length - 1), reason));
      else {
        pending.push((current as Record<string, unknown>)[key]);
        pendingIndexes.push(parents.length - 1);
      }
    }
  }
  return errors;
}

/**
 * Path parameters whose text no store can hold, as a failed validation of the path: answered as a
 * malformed id is (404, or the route's own answer for its path).
 */
export function unstorableParamsError(params: unknown): Error | undefined {
  const refused = unstorableTextErrors(params);
  if (refused.length === 0) return undefined;
  return Object.assign(new Error(refused[0]?.message), {
    statusCode: 400,
    validationContext: "params",
    validation: refused.map(
      (fieldError): ErrorObject => ({
        instancePath: `/${fieldError.field}`,
        schemaPath: "#",
        keyword: "format",
        params: {},
        message: fieldError.message,
      }),
    ),
  });
}
