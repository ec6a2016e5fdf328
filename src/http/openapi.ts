/**
 * What the OpenAPI document says of a route beyond its validation schema, applied as the document is
 * built (`@fastify/swagger`'s `transform`); the schemas that validate requests are not touched.
 */

declare module "fastify" {
  interface FastifySchema {
    /**
     * The operation does what it says without a body too (an object `body` whose fields may all be
     * left out is read as `{}` when none is sent, src/app.ts), so the document marks its request
     * body optional. Not for one where one of several fields must be given (moving the clock).
     */
    bodyOptional?: boolean;
  }
}

type SchemaNode = { [key: string]: unknown };
type Security = Record<string, string[]>[];

const REQUEST_PARTS = ["body", "querystring", "params", "headers"] as const;
/** Schemes of the API keys; where one is accepted, so is the console's session cookie (src/http/auth.ts). */
const KEY_SCHEMES = ["bearer", "apiKeyHeader", "cloudApiKey"];
/**
 * `@fastify/swagger` marks every request body required and copies `x-` keys of a route's schema to
 * its operation: `bodyOptional` travels under this key to `withOptionalBodies`, which removes it.
 */
const BODY_OPTIONAL = "x-cumulo-body-optional";
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
  if (schema.bodyOptional === true) documented[BODY_OPTIONAL] = true;
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

type Document = { paths?: Record<string, unknown> };

/** The document as served: request bodies the operation does without made optional, cloud aliases added. */
export const publishedDocument = <T extends Document>(document: T): T =>
  withCloudAliases(withOptionalBodies(document));

function withOptionalBodies<T extends Document>(document: T): T {
  const paths: Record<string, unknown> = {};
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    if (!isNode(item)) {
      paths[path] = item;
      continue;
    }
    paths[path] = Object.fromEntries(
      Object.entries(item).map(([method, operation]) => {
        if (!isNode(operation) || !(BODY_OPTIONAL in operation)) return [method, operation];
        const { [BODY_OPTIONAL]: _marker, ...documented } = operation;
        if (isNode(documented.requestBody))
          documented.requestBody = { ...documented.requestBody, required: false };
        return [method, documented];
      }),
    );
  }
  return { ...document, paths };
}
const CLOUD_TAG = /^cloud: /;
const ALIAS_TAG = "cloud: under /v1/cloud";
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

const isCloudOperation = (operation: unknown): operation is SchemaNode =>
  isNode(operation) &&
  Array.isArray(operation.tags) &&
  operation.tags.some((tag) => typeof tag === "string" && CLOUD_TAG.test(tag));

const componentRef = (kind: "requestBodies" | "responses", name: string) => ({
  $ref: `#/components/${kind}/${name}`,
});

/** The alias of an operation: its own id and tag, the same parameters, body and answers. */
function aliasOperation(operation: SchemaNode, path: string, method: string): SchemaNode {
  const { operationId, summary, security, parameters, requestBody, responses } = operation;
  return {
    operationId: `${operationId}UnderCloudPrefix`,
    tags: [ALIAS_TAG],
    ...(summary === undefined ? {} : { summary }),
    description: `The same operation as \`${method.toUpperCase()} ${path}\`, under the cloud group prefix.`,
    ...(security === undefined ? {} : { security }),
    ...(parameters === undefined ? {} : { parameters }),
    ...(requestBody === undefined ? {} : { requestBody }),
    responses,
  };
}

/**
 * The document with the cloud routes' group prefix: every cloud route also answers under `/v1/cloud`
 * (CONTRACT.md section 1), with or without a location, and is listed there too. The request body and
 * the answers of a `/v1` cloud operation move to `components` (`requestBodies/getDisk`,
 * `responses/getDisk_200`), referred to by the operation and by its alias, so their schemas are
 * written once; the alias has an id of its own (`getDiskUnderCloudPrefix`: ids stay unique).
 * References to components, rather than into `#/paths`, are what every tool reads (the reference
 * page at /docs did not render with the latter).
 */
function withCloudAliases<T extends Document>(document: T): T {
  const paths = document.paths ?? {};
  const components = isNode((document as SchemaNode).components)
    ? ((document as SchemaNode).components as SchemaNode)
    : {};
  const requestBodies: SchemaNode = isNode(components.requestBodies) ? { ...components.requestBodies } : {};
  const responses: SchemaNode = isNode(components.responses) ? { ...components.responses } : {};
  const shared: Record<string, SchemaNode> = {};
  const aliases: Record<string, SchemaNode> = {};
  for (const [path, item] of Object.entries(paths)) {
    if (!path.startsWith("/v1/") || path.startsWith("/v1/cloud/") || !isNode(item)) continue;
    const alias = `/v1/cloud${path.slice("/v1".length)}`;
    if (alias in paths) continue;
    for (const method of METHODS) {
      const operation = item[method];
      if (!isCloudOperation(operation) || typeof operation.operationId !== "string") continue;
      const id = operation.operationId;
      const referring: SchemaNode = { ...operation };
      if (operation.requestBody !== undefined) {
        requestBodies[id] = operation.requestBody;
        referring.requestBody = componentRef("requestBodies", id);
      }
      if (isNode(operation.responses)) {
        referring.responses = Object.fromEntries(
          Object.entries(operation.responses).map(([status, response]) => {
            responses[`${id}_${status}`] = response;
            return [status, componentRef("responses", `${id}_${status}`)];
          }),
        );
      }
      shared[path] ??= { ...item };
      shared[path][method] = referring;
      aliases[alias] ??= {};
      aliases[alias][method] = aliasOperation(referring, path, method);
    }
  }
  return {
    ...document,
    paths: { ...paths, ...shared, ...aliases },
    components: {
      ...components,
      ...(Object.keys(requestBodies).length > 0 ? { requestBodies } : {}),
      ...(Object.keys(responses).length > 0 ? { responses } : {}),
    },
  };
}
