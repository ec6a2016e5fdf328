/**
 * Cloud operations take the same fields form-urlencoded or as JSON. Form values arrive as text (a
 * repeated key as an array of text), so before validation each value is converted to the type its
 * schema declares when the text says so unambiguously: integers from digits, booleans from
 * true/false/1/0 (the words in any case). Anything else is left as it came and fails validation as the wrong type.
 * JSON bodies get the same two conversions (`{"size_gb": "10"}`, `{"restricted": 1}`), so a client
 * that sends a form's fields as JSON, values still text, is understood as the form would be.
 *
 * Lists of objects (load-balancer rules and targets) can be sent in a form either in bracket
 * notation (`forwarding_rules[0][source_port]=80`) or as a JSON text in the field. Either may nest
 * at most `maxDepth` levels (`CUMULO_MAX_JSON_DEPTH`, as a JSON body): deeper is 400 Invalid Request
 * before anything walks it, since the walks here recurse (docs/security.md).
 */
import { ApiError } from "../http/errors.ts";
import { nestsDeeperThan } from "../http/json-bodies.ts";

interface SchemaNode {
  type?: string | string[];
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  maxItems?: number;
  anyOf?: SchemaNode[];
}

// Any number of digits: one too large for an id or a size is then refused as that field's JSON
// number is (a 404 for an id past the store's, "at most" for a size), not as text.
const INTEGER = /^-?\d+$/;
const NUMBER = /^-?\d+(\.\d+)?$/;

function typesOf(schema: SchemaNode): string[] {
  if (schema.anyOf) return schema.anyOf.flatMap(typesOf);
  if (Array.isArray(schema.type)) return schema.type;
  return schema.type ? [schema.type] : [];
}

/** `true/false/1/0`; the words in any case, since Python clients send `True`/`False` in forms. */
function toBoolean(value: unknown): unknown {
  const text = typeof value === "string" ? value.toLowerCase() : value;
  if (text === "true" || text === "1" || text === 1) return true;
  if (text === "false" || text === "0" || text === 0) return false;
  return value;
}

/** How a form body is read: how deep it may nest, and where to note list indexes as sent. */
export interface FormReading {
  maxDepth: number;
  sentIndexes?: SentIndexes;
}

const UNSAFE_KEYS = new Set(["__proto__", "prototype", "constructor"]);
const BRACKETED = /^([^[\]]+)((?:\[[^[\]]*\])+)$/;

/**
 * `a[0][b]=1` -> `{a: [{b: "1"}]}`; plain keys are kept as they are. An empty bracket stands for the
 * position of each value among the key's values: `rules[][port]=80&rules[][port]=443` gives the first
 * rule port 80 and the second 443 (a form's `keys[]` arrives here as `keys` already: `parseFormText`).
 */
export function expandBrackets(body: Record<string, unknown>, form: FormReading): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    const match = BRACKETED.exec(key);
    if (!match) {
      if (!UNSAFE_KEYS.has(key)) out[key] = value;
      continue;
    }
    const path = [
      match[1] as string,
      ...[...(match[2] as string).matchAll(/\[([^[\]]*)\]/g)].map((m) => m[1] as string),
    ];
    if (path.length > form.maxDepth) throw ApiError.invalidRequest();
    if (path.some((segment) => UNSAFE_KEYS.has(segment))) continue;
    if (!path.includes("")) {
      setAt(out, path, value);
      continue;
    }
    const values = Array.isArray(value) ? value : [value];
    values.forEach((item, position) => {
      setAt(
        out,
        path.map((segment) => (segment === "" ? String(position) : segment)),
        item,
      );
    });
  }
  return toArrays(out, "", form.sentIndexes) as Record<string, unknown>;
}

function setAt(root: Record<string, unknown>, path: string[], value: unknown): void {
  let node = root;
  for (const segment of path.slice(0, -1)) {
    const next = node[segment];
    if (next === null || typeof next !== "object" || Array.isArray(next)) node[segment] = {};
    node = node[segment] as Record<string, unknown>;
  }
  node[path[path.length - 1] as string] = value;
}

/**
 * The index each list item was sent under in a form's brackets, where it differs from its place in
 * the list (`rules[3]` as the second rule): by the item's JSON pointer in the expanded body
 * (`/rules/1` -> `3`). Validation errors name the item as it was sent (`asSent`).
 */
export type SentIndexes = Map<string, string>;

/**
 * Objects whose keys are all indexes (0, 1, ...) become arrays, in index order; an item whose index
 * is not its place in the array (`rules[1]` sent without `rules[0]`) is recorded in `sentIndexes`.
 */
function toArrays(value: unknown, path: string, sentIndexes?: SentIndexes): unknown {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  if (keys.length > 0 && keys.every((key) => /^\d{1,4}$/.test(key))) {
    return keys
      .sort((a, b) => Number(a) - Number(b))
      .map((key, place) => {
        const itemPath = `${path}/${place}`;
        if (key !== String(place)) sentIndexes?.set(itemPath, key);
        return toArrays((value as Record<string, unknown>)[key], itemPath, sentIndexes);
      });
  }
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [key, toArrays(item, `${path}/${key}`, sentIndexes)]),
  );
}

/** A JSON pointer into the expanded body, with each list index as the form sent it. */
export function asSent(pointer: string, sentIndexes: SentIndexes): string {
  let expanded = "";
  let sent = "";
  for (const segment of pointer.split("/").slice(1)) {
    expanded += `/${segment}`;
    sent += `/${sentIndexes.get(expanded) ?? segment}`;
  }
  return sent;
}

function parseJsonText(value: unknown, maxDepth: number): unknown {
  if (typeof value !== "string" || !/^\s*[[{]/.test(value)) return value;
  if (nestsDeeperThan(value, maxDepth)) throw ApiError.invalidRequest();
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

function coerceValue(schema: SchemaNode, raw: unknown, form: FormReading | undefined): unknown {
  const types = typesOf(schema);
  const value =
    form && (types.includes("array") || types.includes("object")) ? parseJsonText(raw, form.maxDepth) : raw;
  const fromForm = form !== undefined;
  if (types.includes("boolean") && typeof value !== "boolean") return toBoolean(value);
  if (typeof value === "string") {
    if (types.includes("integer") && INTEGER.test(value)) return Number(value);
    if (types.includes("number") && NUMBER.test(value)) return Number(value);
    if (fromForm && types.includes("null") && value === "") return null;
  }
  if (types.includes("array")) {
    const list = Array.isArray(value) ? value : fromForm ? [value] : value;
    // A list over its bound is refused for its length alone (`boundsFirst`): its items are not read.
    const overBound = Array.isArray(list) && list.length > (schema.maxItems ?? Number.POSITIVE_INFINITY);
    if (Array.isArray(list) && schema.items && !overBound)
      return list.map((item) => coerceValue(schema.items as SchemaNode, item, form));
    return list;
  }
  if (
    types.includes("object") &&
    schema.properties &&
    value &&
    typeof value === "object" &&
    !Array.isArray(value)
  ) {
    return coerceObject(schema, value as Record<string, unknown>, form && { maxDepth: form.maxDepth });
  }
  return value;
}

/** A body's fields converted as their schema declares them; `form` when it came as a form (else JSON). */
export function coerceObject(
  schema: SchemaNode,
  body: Record<string, unknown>,
  form: FormReading | undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = form ? expandBrackets(body, form) : { ...body };
  for (const [key, property] of Object.entries(schema.properties ?? {})) {
    if (out[key] !== undefined) out[key] = coerceValue(property, out[key], form);
  }
  return out;
}
