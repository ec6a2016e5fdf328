import { isCloudPath } from "../../src/http/auth.ts";
import type { TestApp } from "./app.ts";

/**
 * The authentication and tenant matrix: every authenticated operation of the served OpenAPI document,
 * with what each kind of caller must be answered. One place for what every route file's tests used to
 * repeat by hand.
 */

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  enum?: unknown[];
  format?: string;
  minimum?: number;
  minLength?: number;
  minItems?: number;
};

export type ApiGroupName = "media" | "cdn" | "livestream" | "cloud";

export interface MatrixOperation {
  method: string;
  /** The OpenAPI path template, e.g. `/v1/media/libraries/{libraryId}`. */
  path: string;
  group: ApiGroupName;
  parameters: { name: string; in: string; required?: boolean; schema?: JsonSchema }[];
  bodySchema: JsonSchema | undefined;
  bodyType: string | undefined;
}

export const isWrite = (operation: MatrixOperation): boolean => !["GET", "HEAD"].includes(operation.method);

const groupOf = (path: string): ApiGroupName =>
  isCloudPath(path)
    ? "cloud"
    : path.startsWith("/v1/cdn/")
      ? "cdn"
      : path.startsWith("/v1/livestream/")
        ? "livestream"
        : "media";

/**
 * The operation with its referenced parts read where they are written: a cloud route and its alias
 * under `/v1/cloud` refer to one request body and one set of answers in `components`
 * (src/http/openapi.ts).
 */
export function resolvedOperation(document: any, operation: any): any {
  const resolve = (node: any) =>
    typeof node?.$ref === "string"
      ? node.$ref
          .slice(2)
          .split("/")
          .reduce((at: any, step: string) => at?.[step.replaceAll("~1", "/").replaceAll("~0", "~")], document)
      : node;
  if (!operation) return operation;
  return {
    ...operation,
    ...(operation.parameters ? { parameters: operation.parameters.map(resolve) } : {}),
    ...(operation.requestBody ? { requestBody: resolve(operation.requestBody) } : {}),
    ...(operation.responses
      ? {
          responses: Object.fromEntries(
            Object.entries(operation.responses).map(([status, response]) => [status, resolve(response)]),
          ),
        }
      : {}),
  };
}

/** Every operation that requires a key (the document's `security`), from `/openapi.json`. */
export async function authenticatedOperations(t: TestApp): Promise<MatrixOperation[]> {
  const document = (await t.request("GET", "/openapi.json", { anonymous: true })).body as any;
  const operations: MatrixOperation[] = [];
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const method of ["get", "post", "put", "patch", "delete"]) {
      const operation = resolvedOperation(document, item[method]);
      if (!operation?.security?.length) continue;
      // The console's own session routes take only the cookie; test/console-auth covers them.
      if (operation.security.every((scheme: object) => "consoleSession" in scheme)) continue;
      const content = operation.requestBody?.content ?? {};
      const bodyType = content["application/json"] ? "application/json" : Object.keys(content)[0];
      operations.push({
        method: method.toUpperCase(),
        path,
        group: groupOf(path),
        parameters: operation.parameters ?? [],
        bodySchema: bodyType === "application/json" ? content[bodyType].schema : undefined,
        bodyType,
      });
    }
  }
  return operations;
}

/** The headers that carry `key` the way the group expects it (CONTRACT.md section 3). */
export const rightHeader = (group: ApiGroupName, key: string): Record<string, string> =>
  group === "cloud" ? { apikey: key } : { authorization: `Bearer ${key}` };

/** A header another group would accept but this one does not. */
export const wrongHeader = (group: ApiGroupName, key: string): Record<string, string> =>
  group === "cloud" ? { authorization: `Bearer ${key}` } : { apikey: key };

/** The 401 for a request with no credential this group accepts, exactly as CONTRACT.md states it. */
export const missingCredentialBody = (group: ApiGroupName) =>
  group === "cloud"
    ? { error: "unauthorized", message: "No API key found in request" }
    : {
        success: false,
        error: "unauthorized",
        code: "auth_type_not_found",
        message:
          "Could not determine the authentication type: provide a valid Authorization or X-API-Key header.",
      };

/** Whether `body` is the group's error shape carrying `error` (401 `unauthorized`, 403 `forbidden`). */
export function isGroupError(group: ApiGroupName, body: any, error: string): boolean {
  if (typeof body !== "object" || body === null || body.error !== error) return false;
  return group === "cloud" ? !("success" in body) : body.success === false;
}

/** Whether `body` is the group's 404 (another tenant's resource does not exist). */
export function isNotFound(group: ApiGroupName, body: any): boolean {
  return group === "cloud"
    ? typeof body?.message === "string" && / not found$/.test(body.message) && !("success" in body)
    : body?.success === false && body.message === "Resource not found";
}

/** Resources of one organization, made through the API, by the names the operations address them. */
export type TenantResources = Record<string, string | number>;

/** Makes one of every addressable resource for the caller `key`, through the API only. */
export async function createTenantResources(t: TestApp, key: string): Promise<TenantResources> {
  const media = async (method: string, path: string, json?: unknown) => {
    const response = await t.request(method, path, { key, ...(json === undefined ? {} : { json }) });
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${response.text}`);
    return (response.body as any).data;
  };
  const cloud = async (method: string, path: string, json?: unknown) => {
    const response = await t.cloud(method, path, { key, ...(json === undefined ? {} : { json }) });
    if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${response.text}`);
    return response.body as any;
  };
  const library = await media("POST", "/v1/media/libraries", { name: "Matrix library" });
  const libraryPath = `/v1/media/libraries/${library.id}`;
  const folder = await media("POST", `${libraryPath}/folders`, { name: "Matrix folder" });
  const video = await media("POST", `${libraryPath}/videos`, { title: "Matrix video" });
  const player = await media("POST", `${libraryPath}/players`, { name: "Matrix player" });
  const form = new FormData();
  form.set("title", "English");
  form.set("language", "en");
  form.set("file", new Blob(["WEBVTT\n\n00:00.000 --> 00:01.000\nHello\n"]), "en.vtt");
  const subtitle = await t.request("POST", `${libraryPath}/videos/${video.id}/subtitles`, {
    key,
    body: form,
  });
  if (subtitle.status !== 201) throw new Error(`subtitle: ${subtitle.status} ${subtitle.text}`);
  const endpoint = await media("POST", `${libraryPath}/webhooks`, {
    name: "Matrix endpoint",
    // `.invalid` never resolves (RFC 6761): the test delivery fails at once, connecting nowhere.
    url: "https://matrix.invalid/hook",
    events: ["*"],
  });
  const delivery = await media("POST", `${libraryPath}/webhooks/${endpoint.id}/test`);
  await media("POST", `${libraryPath}/videos/${video.id}/source/fetch`, {
    url: "https://matrix.invalid/v.mp4",
  });
  const meta = (name: string, value: string) => `${name} ${Buffer.from(value).toString("base64")}`;
  const upload = await t.request("POST", "/v1/media/tus", {
    key,
    headers: {
      "tus-resumable": "1.0.0",
      "upload-length": "1024",
      "upload-metadata": [meta("library_id", library.id), meta("video_id", video.id)].join(","),
    },
  });
  const uploadUrl = upload.headers.get("location");
  if (upload.status !== 201 || !uploadUrl) throw new Error(`tus upload: ${upload.status} ${upload.text}`);
  const distribution = await media("POST", "/v1/cdn/distributions", {
    hostname: `matrix-${library.id.slice(0, 8)}.example.com`,
    origin_url: "https://origin.matrix.invalid",
  });
  const apiKey = await media("POST", "/v1/organization/api-keys", { name: "Matrix key" });
  const vm = await cloud("POST", "/v1/user-resource/vm", { name: "matrix" });
  const disk = await cloud("POST", "/v1/storage/disks", { size_gb: 10 });
  const ip = await cloud("POST", "/v1/network/ip_addresses", {});
  const balancer = await cloud("POST", "/v1/network/load_balancers", {
    forwarding_rules: [{ protocol: "TCP", source_port: 80, target_port: 8080 }],
    targets: [{ target_uuid: vm.uuid, target_type: "vm" }],
  });
  // A token's creation answers `[token]` (CONTRACT.md section 9).
  const [token] = await cloud("POST", "/v1/user-resource/token", {});
  await cloud("GET", "/v1/storage/user");
  // The answer is every key pair of the user; the last one is the pair just made.
  const s3Keys = (await cloud("POST", "/v1/storage/user/keys")) as { accessKey: string }[];
  return {
    location: t.config.locations[0]?.slug ?? "",
    libraryId: library.id,
    folderId: folder.id,
    videoId: video.id,
    playerId: player.id,
    subtitleId: subtitle.body.data.id,
    endpointId: endpoint.id,
    deliveryId: delivery.id,
    uploadId: String(uploadUrl).split("/").pop() ?? "",
    distributionID: distribution.id,
    disk_uuid: disk.uuid,
    public_ipv4_address: ip.address,
    load_balancer_uuid: balancer.uuid,
    rule_uuid: balancer.forwarding_rules[0].uuid,
    target_uuid: vm.uuid,
    // Fields of query strings and bodies that name a resource.
    uuid: vm.uuid,
    storage_uuid: disk.uuid,
    token_id: token.id,
    access_key: s3Keys[s3Keys.length - 1]?.accessKey ?? "",
    folder_ids: folder.id,
    keyId: apiKey.id,
  };
}

/** Field names (path, query or body) that address a resource rather than describe one. */
const ADDRESSING_FIELDS = new Set(["uuid", "token_id", "access_key", "folder_ids"]);

/** Whether the operation names an existing resource (so another organization must get 404). */
export function addressesResource(operation: MatrixOperation): boolean {
  const named = operation.parameters.some(
    (p) => (p.in === "path" && p.name !== "location") || (p.in === "query" && ADDRESSING_FIELDS.has(p.name)),
  );
  const inBody = Object.keys(operation.bodySchema?.properties ?? {}).some((name) =>
    ADDRESSING_FIELDS.has(name),
  );
  return named || inBody;
}

/** The operation's URL with its path parameters (and addressing query fields) taken from `resources`. */
export function urlOf(operation: MatrixOperation, resources: TenantResources): string {
  const path = operation.path.replace(/\{([^}]+)\}/g, (_match, name: string) => {
    const value = resources[name];
    if (value === undefined) throw new Error(`no resource for {${name}} in ${operation.path}`);
    return encodeURIComponent(String(value));
  });
  const query = new URLSearchParams();
  for (const parameter of operation.parameters) {
    if (parameter.in !== "query") continue;
    const value = resources[parameter.name];
    if (ADDRESSING_FIELDS.has(parameter.name) && value !== undefined)
      query.set(parameter.name, String(value));
    else if (parameter.required)
      query.set(parameter.name, String(exampleOf(parameter.schema ?? {}, parameter.name, resources)));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/** The smallest body the operation's schema accepts, with addressing fields taken from `resources`. */
export function exampleBody(operation: MatrixOperation, resources: TenantResources): string | undefined {
  if (operation.bodyType !== "application/json" || !operation.bodySchema) return undefined;
  return JSON.stringify(exampleOf(operation.bodySchema, "", resources));
}

/** Values the schema alone does not describe well enough to make one up. */
const FIELD_EXAMPLES: Record<string, string> = { paths: "/matrix.txt" };

function exampleOf(schema: JsonSchema, name: string, resources: TenantResources): unknown {
  if (schema.anyOf?.[0]) return exampleOf(schema.anyOf[0], name, resources);
  if (schema.enum?.length) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  const known = resources[name];
  switch (type) {
    case "object": {
      const body: Record<string, unknown> = {};
      for (const [property, inner] of Object.entries(schema.properties ?? {})) {
        if (schema.required?.includes(property) || ADDRESSING_FIELDS.has(property)) {
          body[property] = exampleOf(inner, property, resources);
        }
      }
      return body;
    }
    case "array":
      return Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () =>
        exampleOf(schema.items ?? {}, name, resources),
      );
    case "integer":
    case "number":
      return typeof known === "number" ? known : (schema.minimum ?? 1);
    case "boolean":
      return false;
    default:
      if (known !== undefined) return String(known);
      if (name in FIELD_EXAMPLES) return FIELD_EXAMPLES[name];
      if (schema.format === "uuid") return "5b0c9a1e-8d3f-4c2a-9e71-3f5d2b8c4a10";
      if (schema.format === "uri" || /url$/.test(name)) return "https://93.184.215.14/path";
      return "x".repeat(Math.max(1, schema.minLength ?? 1));
  }
}
