import { isUuid } from "../ids.ts";

/**
 * On a string schema whose value names a resource by id though any text is accepted (an unknown one
 * is 404, not a validation error): a UUID there is matched without regard to case.
 */
export const NAMES_RESOURCE = Symbol("names a resource");

export interface IdentifierSchema {
  format?: string;
  properties?: Record<string, IdentifierSchema>;
  items?: IdentifierSchema;
  anyOf?: IdentifierSchema[];
  [NAMES_RESOURCE]?: true;
}

/** Whether a value of this schema names a resource by id: `format: "uuid"` or marked `NAMES_RESOURCE`. */
const namesResource = (schema: IdentifierSchema): boolean =>
  schema.format === "uuid" || schema[NAMES_RESOURCE] === true || (schema.anyOf?.some(namesResource) ?? false);

/**
 * Path parameters and query values: every UUID lower-cased. Ids are compared lower-case: PostgreSQL's
 * uuid columns ignore case and SQLite's text columns do not, so an upper-case id would otherwise be
 * found on one store only.
 */
export function lowerCaseUuids(values: unknown): void {
  if (typeof values !== "object" || values === null) return;
  const record = values as Record<string, unknown>;
  for (const [name, value] of Object.entries(record)) {
    if (typeof value === "string" && isUuid(value)) record[name] = value.toLowerCase();
  }
}

const holdingIds = new WeakMap<IdentifierSchema, boolean>();

/**
 * Whether a value of this schema may hold an id to lower-case: a list of ports, say, is not walked
 * item by item (a body of a megabyte may hold hundreds of thousands of them).
 */
function holdsIds(schema: IdentifierSchema): boolean {
  let holds = holdingIds.get(schema);
  if (holds === undefined) {
    holds =
      namesResource(schema) ||
      Object.values(schema.properties ?? {}).some(holdsIds) ||
      (schema.items !== undefined && holdsIds(schema.items)) ||
      (schema.anyOf?.some(holdsIds) ?? false);
    holdingIds.set(schema, holds);
  }
  return holds;
}

/**
 * A body's fields that name resources, as its schema says (in nested objects and lists too), with
 * UUIDs lower-cased; other text, a name that looks like a UUID say, is left as sent.
 */
export function lowerCaseIdFields(schema: IdentifierSchema | undefined, value: unknown): unknown {
  if (!schema || !holdsIds(schema)) return value;
  if (typeof value === "string") return namesResource(schema) && isUuid(value) ? value.toLowerCase() : value;
  if (Array.isArray(value)) {
    const items = schema.items;
    return items ? value.map((item) => lowerCaseIdFields(items, item)) : value;
  }
  if (typeof value === "object" && value !== null && schema.properties) {
    const record = value as Record<string, unknown>;
    for (const [name, property] of Object.entries(schema.properties)) {
      if (record[name] !== undefined) record[name] = lowerCaseIdFields(property, record[name]);
    }
  }
  return value;
}
