/**
 * What the OpenAPI document says of a route beyond its validation schema, applied as the document is
 * built (`@fastify/swagger`'s `transform`); the schemas that validate requests are not touched.
 */

type SchemaNode = { [key: string]: unknown };
type Security = Record<string, string[]>[];

const REQUEST_PARTS = ["body", "querystring", "params", "headers"] as const;
/** Schemes of the API keys; where one is accepted, so is the console's session cookie (src/http/auth.ts). */
const KEY_SCHEMES = ["bearer", "apiKeyHeader", "cloudApiKey"];
const SESSION = { consoleSession: [] };

const isNode = (value: unknown): value is SchemaNode =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * A copy of a request schema in which a property with a default is not required: validation fills
 * it in, so a caller may leave it out (`limit`, a rule's `enabled`). Response schemas keep theirs:
 * there the field is always sent.
 */
export function defaultsOptional(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(defaultsOptional);
  if (!isNode(schema)) return schema;
  const copy: SchemaNode = {};
  for (const [key, value] of Object.entries(schema)) copy[key] = defaultsOptional(value);
  const { properties, required } = copy;
  if (isNode(properties) && Array.isArray(required)) {
    const stillRequired = required.filter(
      (name) => !(isNode(properties[name]) && "default" in properties[name]),
    );
    if (stillRequired.length > 0) copy.required = stillRequired;
    else delete copy.required;
  }
  return copy;
}

/**
 * The route's schema as the document shows it. `takesSession`: the route authenticates through
 * src/http/auth.ts, which takes the console's session where it takes a key (developer mode does not).
 */
export function documentedSchema<T extends object>(
  routeSchema: T,
  method: string | string[],
  takesSession: boolean,
): T {
  // Routes registered without a schema have none here, whatever the type says.
  if (!routeSchema) return routeSchema;
  const schema = routeSchema as SchemaNode;
  const documented: SchemaNode = { ...schema };
  // The plugin names a HEAD operation after its GET's; the only HEAD routes shown are registered
  // as such (tus), with ids of their own.
  if (method === "HEAD" && typeof schema.operationId === "string") {
    documented.operationId = schema.operationId.replace(/-head$/, "");
  }
  for (const part of REQUEST_PARTS) {
    if (schema[part] !== undefined) documented[part] = defaultsOptional(schema[part]);
  }
  const security = schema.security as Security | undefined;
  if (
    takesSession &&
    security?.some((option) => KEY_SCHEMES.some((name) => name in option)) &&
    !security.some((option) => "consoleSession" in option)
  ) {
    documented.security = [...security, SESSION];
  }
  return documented as T;
}
