import formbody from "@fastify/formbody";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type TProperties, Type } from "@sinclair/typebox";
import type { FastifyError, FastifyRequest } from "fastify";
import { requireApiKey } from "../http/auth.ts";
import { ApiError } from "../http/errors.ts";
import { cloudErrorResponses, Uuid } from "../http/schemas.ts";
import { cloudDateTime } from "../http/time.ts";
import type { CloudTokenRecord, IdentityService } from "../identity/service.ts";
import { coerceObject } from "./coerce.ts";
import type { Outcome } from "./outcome.ts";
import * as S from "./schemas.ts";
import type { CloudService } from "./service.ts";

/** Where this registration of the cloud routes lives; the same routes answer under four prefixes. */
export type CloudPrefix = "/v1" | "/v1/:location" | "/v1/cloud" | "/v1/cloud/:location";

export const CLOUD_PREFIXES: readonly CloudPrefix[] = [
  "/v1",
  "/v1/:location",
  "/v1/cloud",
  "/v1/cloud/:location",
];

const SECURITY: { [label: string]: string[] }[] = [{ cloudApiKey: [] }, { apiKeyHeader: [] }];

/** Every cloud body is accepted in both encodings (coerce.ts). */
const CONSUMES = ["application/x-www-form-urlencoded", "application/json"];

const NO_ROUTE = "no route and no API found with those values";

/** What a path parameter names, for the 404 of a malformed one. */
const PATH_THINGS: Record<string, string> = {
  disk_uuid: "Disk",
  address: "IP address",
  load_balancer_uuid: "Load balancer",
  target_uuid: "Target",
  rule_uuid: "Forwarding rule",
};

function unwrap<T>(outcome: Outcome<T>): T {
  if (outcome.ok) return outcome.value;
  const failure = outcome.failure;
  switch (failure.kind) {
    case "not_found":
      throw failure.message ? new ApiError(404, failure.message) : ApiError.notFound(failure.thing);
    case "conflict":
      throw ApiError.conflict(failure.message);
    case "invalid":
      throw ApiError.field(failure.field, "validation_format", failure.message);
    case "forbidden":
      throw ApiError.forbidden(failure.message);
  }
}

function hasNul(value: unknown): boolean {
  if (typeof value === "string") return value.includes("\u0000");
  if (Array.isArray(value)) return value.some(hasNul);
  if (value && typeof value === "object") {
    return Object.entries(value).some(([key, item]) => key.includes("\u0000") || hasNul(item));
  }
  return false;
}

function tokenView(record: CloudTokenRecord, token?: string) {
  return {
    id: record.id,
    billing_account_id: record.billing_account_id,
    user_id: record.user_id,
    consumer_id: record.consumer_id,
    description: record.description,
    restricted: record.restricted,
    ...(token ? { token } : {}),
    created_at: cloudDateTime(record.created_at),
    updated_at: cloudDateTime(record.updated_at),
  };
}

export const cloudRoutes: FastifyPluginAsyncTypebox<{
  cloud: CloudService;
  identity: IdentityService;
  at: CloudPrefix;
}> = async (app, { cloud, identity, at }) => {
  const located = at.endsWith(":location");
  // /v1 and /v1/{location} are documented; the /v1/cloud aliases answer the same but stay out of the document.
  const hidden = at.startsWith("/v1/cloud");
  const suffix = located ? "AtLocation" : "";

  // An unknown location slug is a route that does not exist, checked before the key.
  app.addHook("onRequest", async (request) => {
    request.apiGroup = "cloud";
    const slug = (request.params as { location?: string }).location;
    if (slug !== undefined && !cloud.hasLocation(slug)) {
      throw new ApiError(404, NO_ROUTE, { body: { message: NO_ROUTE } });
    }
  });
  requireApiKey(app, "cloud", identity);
  await app.register(formbody);

  // A malformed identifier in the path names nothing: 404 naming the kind of resource, like an
  // unknown one. Every other error goes on to the application's handler.
  app.setErrorHandler((error: FastifyError) => {
    if (error.validation && error.validationContext === "params") {
      const param = error.validation
        .map((issue) => issue.instancePath.replace(/^\//, "") || String(issue.params.missingProperty ?? ""))
        .find((name) => PATH_THINGS[name] !== undefined);
      if (param) throw ApiError.notFound(PATH_THINGS[param]);
    }
    throw error;
  });

  // Form values arrive as text: convert them to the declared types before validation (coerce.ts).
  app.addHook("preValidation", async (request) => {
    const schema = request.routeOptions.schema?.body as Parameters<typeof coerceObject>[0] | undefined;
    if (!schema) return;
    const fromForm = (request.headers["content-type"] ?? "").includes("application/x-www-form-urlencoded");
    const body = request.body;
    if (body === undefined || body === null || body === "") {
      request.body = {};
    } else if (typeof body === "object" && !Array.isArray(body)) {
      // PostgreSQL text cannot hold NUL; no field of the cloud API needs one.
      if (hasNul(body)) throw ApiError.invalidRequest();
      request.body = coerceObject(schema, body as Record<string, unknown>, fromForm);
    } else {
      // A JSON array, string or number where an object of fields belongs.
      throw ApiError.invalidRequest();
    }
  });

  const locationOf = (request: FastifyRequest): string =>
    (request.params as { location?: string }).location ?? cloud.defaultLocation;

  const params = <T extends TProperties>(properties: T) =>
    Type.Object({
      ...(located
        ? { location: Type.String({ description: "Location slug (GET /v1/config/locations)" }) }
        : {}),
      ...properties,
    });
  const noParams = located ? { params: params({}) } : {};

  const doc = (operationId: string, tag: string, summary: string) => ({
    operationId: `${operationId}${suffix}`,
    tags: [`cloud: ${tag}`],
    summary,
    security: SECURITY,
    consumes: CONSUMES,
    ...(hidden ? { hide: true } : {}),
  });

  const denyRestricted = (request: FastifyRequest) => {
    if (request.auth.restricted) throw ApiError.forbidden("A restricted token cannot manage tokens");
  };

  // Configuration and billing

  app.get(
    "/config/locations",
    {
      schema: {
        ...doc("listLocations", "config", "List locations"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.LocationView) },
      },
    },
    async () => cloud.listLocations(),
  );

  app.get(
    "/payment/billing_account/list",
    {
      schema: {
        ...doc("listBillingAccounts", "billing", "List the organization's billing accounts"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.BillingAccountView) },
      },
    },
    async (request) =>
      (await identity.listBillingAccounts(request.auth.organizationId)).map((account) => ({
        ...account,
        is_active: true,
      })),
  );

  // Tokens

  app.post(
    "/user-resource/token",
    {
      schema: {
        ...doc("createToken", "tokens", "Create an API token (its secret is shown once)"),
        ...noParams,
        body: S.CreateTokenBody,
        response: { ...cloudErrorResponses, 200: Type.Array(S.TokenView) },
      },
    },
    async (request) => {
      denyRestricted(request);
      const billing = unwrap(await cloud.checkBillingAccount(request.auth, request.body.billing_account_id));
      const created = await identity.createCloudToken(request.auth, {
        billingAccountId: billing,
        description: request.body.description ?? "",
        restricted: request.body.restricted ?? false,
      });
      return [tokenView(created.record, created.token)];
    },
  );

  app.get(
    "/user-resource/token/list",
    {
      schema: {
        ...doc("listTokens", "tokens", "List API tokens"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.TokenView) },
      },
    },
    async (request) => (await identity.listCloudTokens(request.auth.organizationId)).map((t) => tokenView(t)),
  );

  app.patch(
    "/user-resource/token",
    {
      schema: {
        ...doc("updateToken", "tokens", "Change a token's description, restriction or billing account"),
        ...noParams,
        body: S.UpdateTokenBody,
        response: { ...cloudErrorResponses, 200: Type.Array(S.TokenView) },
      },
    },
    async (request) => {
      denyRestricted(request);
      const body = request.body;
      if (body.billing_account_id !== undefined) {
        unwrap(await cloud.checkBillingAccount(request.auth, body.billing_account_id));
      }
      const updated = await identity.updateCloudToken(request.auth.organizationId, body.token_id, {
        description: body.description,
        restricted: body.restricted,
        billingAccountId: body.billing_account_id,
      });
      if (!updated) throw new ApiError(404, "Failed to update token: token not found");
      return [tokenView(updated)];
    },
  );

  app.delete(
    "/user-resource/token",
    {
      schema: {
        ...doc("deleteToken", "tokens", "Delete an API token; it stops working at once"),
        ...noParams,
        body: S.TokenIdBody,
        querystring: S.TokenIdBody,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      denyRestricted(request);
      const id = request.body.token_id ?? request.query.token_id;
      if (id === undefined)
        throw ApiError.field("token_id", "validation_required", "The token_id field is required.");
      if (!(await identity.deleteCloudToken(request.auth.organizationId, id))) {
        throw new ApiError(404, "Failed to delete token: token not found");
      }
      return { success: true as const };
    },
  );

  // Virtual machines

  app.post(
    "/user-resource/vm",
    {
      schema: {
        ...doc("createVm", "virtual machines", "Create a virtual machine"),
        ...noParams,
        body: S.CreateVmBody,
        response: { ...cloudErrorResponses, 200: S.VmView },
      },
    },
    async (request) => {
      const body = request.body;
      const publicKeys = [...(body.public_key ? [body.public_key] : []), ...(body.public_keys ?? [])];
      return unwrap(
        await cloud.createVm(request.auth, locationOf(request), {
          name: body.name,
          osName: body.os_name,
          osVersion: body.os_version,
          vcpu: body.vcpu,
          ram: body.ram,
          disks: body.disks,
          username: body.username,
          password: body.password,
          publicKeys,
          billingAccountId: body.billing_account_id,
          description: body.description,
          reservePublicIp: body.reserve_public_ip,
        }),
      );
    },
  );

  app.get(
    "/user-resource/vm",
    {
      schema: {
        ...doc("getVm", "virtual machines", "Get a virtual machine"),
        ...noParams,
        querystring: S.VmUuidQuery,
        response: { ...cloudErrorResponses, 200: S.VmView },
      },
    },
    async (request) => unwrap(await cloud.getVm(request.auth, locationOf(request), request.query.uuid)),
  );

  app.get(
    "/user-resource/vm/list",
    {
      schema: {
        ...doc("listVms", "virtual machines", "List virtual machines of the location"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.VmView) },
      },
    },
    async (request) => cloud.listVms(request.auth, locationOf(request)),
  );

  app.patch(
    "/user-resource/vm",
    {
      schema: {
        ...doc("updateVm", "virtual machines", "Rename, describe or resize a virtual machine"),
        ...noParams,
        body: S.UpdateVmBody,
        response: { ...cloudErrorResponses, 200: S.VmView },
      },
    },
    async (request) => {
      const { uuid, name, vcpu, ram, description } = request.body;
      return unwrap(
        await cloud.updateVm(request.auth, locationOf(request), uuid, { name, vcpu, ram, description }),
      );
    },
  );

  for (const [action, state] of [
    ["start", "running"],
    ["stop", "stopped"],
  ] as const) {
    app.post(
      `/user-resource/vm/${action}`,
      {
        schema: {
          ...doc(
            `${action}Vm`,
            "virtual machines",
            `${action === "start" ? "Start" : "Stop"} a virtual machine`,
          ),
          ...noParams,
          body: S.VmUuidBody,
          response: { ...cloudErrorResponses, 200: S.VmView },
        },
      },
      async (request) =>
        unwrap(await cloud.setPower(request.auth, locationOf(request), request.body.uuid, state)),
    );
  }

  app.delete(
    "/user-resource/vm",
    {
      schema: {
        ...doc("deleteVm", "virtual machines", "Delete a virtual machine (data disks are detached and kept)"),
        ...noParams,
        body: S.DeleteVmBody,
        querystring: S.DeleteVmQuery,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const uuid = request.body.uuid ?? request.query.uuid;
      if (uuid === undefined)
        throw ApiError.field("uuid", "validation_required", "The uuid field is required.");
      return unwrap(await cloud.deleteVm(request.auth, locationOf(request), uuid));
    },
  );

  app.post(
    "/user-resource/vm/storage/attach",
    {
      schema: {
        ...doc("attachDisk", "disks", "Attach a disk to a virtual machine"),
        ...noParams,
        body: S.AttachBody,
        response: { ...cloudErrorResponses, 200: S.AttachView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.attachDisk(
          request.auth,
          locationOf(request),
          request.body.uuid,
          request.body.storage_uuid,
        ),
      ),
  );

  app.post(
    "/user-resource/vm/storage/detach",
    {
      schema: {
        ...doc("detachDisk", "disks", "Detach a disk from a virtual machine"),
        ...noParams,
        body: S.AttachBody,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) =>
      unwrap(
        await cloud.detachDisk(
          request.auth,
          locationOf(request),
          request.body.uuid,
          request.body.storage_uuid,
        ),
      ),
  );

  // Disks

  app.post(
    "/storage/disks",
    {
      schema: {
        ...doc("createDisk", "disks", "Create an empty disk"),
        ...noParams,
        body: S.CreateDiskBody,
        response: { ...cloudErrorResponses, 200: S.DiskView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.createDisk(request.auth, locationOf(request), {
          sizeGb: request.body.size_gb,
          billingAccountId: request.body.billing_account_id,
          displayName: request.body.display_name,
        }),
      ),
  );

  app.get(
    "/storage/disks",
    {
      schema: {
        ...doc("listDisks", "disks", "List disks of the location"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.DiskView) },
      },
    },
    async (request) => cloud.listDisks(request.auth, locationOf(request)),
  );

  const DiskParams = params({ disk_uuid: Uuid });

  app.get(
    "/storage/disks/:disk_uuid",
    {
      schema: {
        ...doc("getDisk", "disks", "Get a disk"),
        params: DiskParams,
        response: { ...cloudErrorResponses, 200: S.DiskView },
      },
    },
    async (request) =>
      unwrap(await cloud.getDisk(request.auth, locationOf(request), request.params.disk_uuid)),
  );

  app.patch(
    "/storage/disks/:disk_uuid",
    {
      schema: {
        ...doc("updateDisk", "disks", "Rename, re-bill or grow a disk"),
        params: DiskParams,
        body: S.UpdateDiskBody,
        response: { ...cloudErrorResponses, 200: S.DiskView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.updateDisk(request.auth, locationOf(request), request.params.disk_uuid, {
          displayName: request.body.display_name,
          billingAccountId: request.body.billing_account_id,
          sizeGb: request.body.size_gb,
        }),
      ),
  );

  app.delete(
    "/storage/disks/:disk_uuid",
    {
      schema: {
        ...doc("deleteDisk", "disks", "Delete a disk (refused while attached)"),
        params: DiskParams,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) =>
      unwrap(await cloud.deleteDisk(request.auth, locationOf(request), request.params.disk_uuid)),
  );

  // Floating IPs

  const allocate = {
    schema: {
      ...doc("allocateFloatingIp", "floating IPs", "Allocate the lowest free public address"),
      ...noParams,
      body: S.CreateFloatingIpBody,
      response: { ...cloudErrorResponses, 200: S.FloatingIpView },
    },
  };
  const allocateHandler = async (
    request: FastifyRequest<{ Body: { billing_account_id?: number; name?: string } }>,
  ) =>
    unwrap(
      await cloud.allocateFloatingIp(request.auth, locationOf(request), {
        billingAccountId: request.body.billing_account_id,
        name: request.body.name,
      }),
    );
  app.post("/network/ip_addresses", allocate, allocateHandler);

  app.get(
    "/network/ip_addresses",
    {
      schema: {
        ...doc("listFloatingIps", "floating IPs", "List floating IPs (optionally those of one VM)"),
        ...noParams,
        querystring: S.FloatingIpQuery,
        response: { ...cloudErrorResponses, 200: Type.Array(S.FloatingIpView) },
      },
    },
    async (request) =>
      cloud.listFloatingIps(request.auth, locationOf(request), {
        vmUuid: request.query.vm_uuid,
        billingAccountId: request.query.billing_account_id,
      }),
  );

  const AddressParams = params({ address: Type.String({ format: "ipv4" }) });

  app.get(
    "/network/ip_addresses/:address",
    {
      schema: {
        ...doc("getFloatingIp", "floating IPs", "Get a floating IP"),
        params: AddressParams,
        response: { ...cloudErrorResponses, 200: S.FloatingIpView },
      },
    },
    async (request) =>
      unwrap(await cloud.getFloatingIp(request.auth, locationOf(request), request.params.address)),
  );

  app.patch(
    "/network/ip_addresses/:address",
    {
      schema: {
        ...doc("updateFloatingIp", "floating IPs", "Rename or re-bill a floating IP"),
        params: AddressParams,
        body: S.UpdateFloatingIpBody,
        response: { ...cloudErrorResponses, 200: S.FloatingIpView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.updateFloatingIp(request.auth, locationOf(request), request.params.address, {
          name: request.body.name,
          billingAccountId: request.body.billing_account_id,
        }),
      ),
  );

  app.delete(
    "/network/ip_addresses/:address",
    {
      schema: {
        ...doc("deleteFloatingIp", "floating IPs", "Release a floating IP (refused while assigned)"),
        params: AddressParams,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) =>
      unwrap(await cloud.deleteFloatingIp(request.auth, locationOf(request), request.params.address)),
  );

  app.post(
    "/network/ip_addresses/:address/assign",
    {
      schema: {
        ...doc("assignFloatingIp", "floating IPs", "Assign a floating IP to a VM or load balancer"),
        params: AddressParams,
        body: S.AssignBody,
        response: { ...cloudErrorResponses, 200: S.FloatingIpView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.assignFloatingIp(request.auth, locationOf(request), request.params.address, {
          uuid: request.body.assigned_to,
          type: request.body.assigned_to_resource_type,
        }),
      ),
  );

  app.post(
    "/network/ip_addresses/:address/unassign",
    {
      schema: {
        ...doc("unassignFloatingIp", "floating IPs", "Unassign a floating IP"),
        params: AddressParams,
        response: { ...cloudErrorResponses, 200: S.FloatingIpView },
      },
    },
    async (request) =>
      unwrap(await cloud.unassignFloatingIp(request.auth, locationOf(request), request.params.address)),
  );

  // Load balancers

  app.post(
    "/network/load_balancers",
    {
      schema: {
        ...doc("createLoadBalancer", "load balancers", "Create a load balancer"),
        ...noParams,
        body: S.CreateLoadBalancerBody,
        response: { ...cloudErrorResponses, 200: S.LoadBalancerView },
      },
    },
    async (request) => {
      const body = request.body;
      const rulesField =
        body.forwarding_rules !== undefined || body.rules === undefined ? "forwarding_rules" : "rules";
      return unwrap(
        await cloud.createLoadBalancer(request.auth, locationOf(request), {
          displayName: body.display_name,
          billingAccountId: body.billing_account_id,
          rules: body.forwarding_rules ?? body.rules ?? [],
          rulesField,
          targets: body.targets ?? [],
        }),
      );
    },
  );

  app.get(
    "/network/load_balancers",
    {
      schema: {
        ...doc("listLoadBalancers", "load balancers", "List load balancers of the location"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.LoadBalancerView) },
      },
    },
    async (request) => cloud.listLoadBalancers(request.auth, locationOf(request)),
  );

  const LbParams = params({ load_balancer_uuid: Uuid });

  app.get(
    "/network/load_balancers/:load_balancer_uuid",
    {
      schema: {
        ...doc("getLoadBalancer", "load balancers", "Get a load balancer"),
        params: LbParams,
        response: { ...cloudErrorResponses, 200: S.LoadBalancerView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.getLoadBalancer(request.auth, locationOf(request), request.params.load_balancer_uuid),
      ),
  );

  app.patch(
    "/network/load_balancers/:load_balancer_uuid",
    {
      schema: {
        ...doc("updateLoadBalancer", "load balancers", "Rename a load balancer"),
        params: LbParams,
        body: S.UpdateLoadBalancerBody,
        response: { ...cloudErrorResponses, 200: S.LoadBalancerView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.updateLoadBalancer(request.auth, locationOf(request), request.params.load_balancer_uuid, {
          displayName: request.body.display_name,
        }),
      ),
  );

  app.put(
    "/network/load_balancers/:load_balancer_uuid/billing_account",
    {
      schema: {
        ...doc(
          "setLoadBalancerBillingAccount",
          "load balancers",
          "Charge a load balancer to another billing account",
        ),
        params: LbParams,
        body: S.SetBillingBody,
        response: { ...cloudErrorResponses, 200: S.LoadBalancerView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.setLoadBalancerBilling(
          request.auth,
          locationOf(request),
          request.params.load_balancer_uuid,
          request.body.set_id,
        ),
      ),
  );

  app.delete(
    "/network/load_balancers/:load_balancer_uuid",
    {
      schema: {
        ...doc("deleteLoadBalancer", "load balancers", "Delete a load balancer"),
        params: LbParams,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) =>
      unwrap(
        await cloud.deleteLoadBalancer(request.auth, locationOf(request), request.params.load_balancer_uuid),
      ),
  );

  app.post(
    "/network/load_balancers/:load_balancer_uuid/targets",
    {
      schema: {
        ...doc("addLoadBalancerTarget", "load balancers", "Add a VM target"),
        params: LbParams,
        body: S.TargetBody,
        response: { ...cloudErrorResponses, 200: S.TargetView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.addTarget(
          request.auth,
          locationOf(request),
          request.params.load_balancer_uuid,
          request.body,
        ),
      ),
  );

  app.delete(
    "/network/load_balancers/:load_balancer_uuid/targets/:target_uuid",
    {
      schema: {
        ...doc("removeLoadBalancerTarget", "load balancers", "Remove a target"),
        params: params({ load_balancer_uuid: Uuid, target_uuid: Uuid }),
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) =>
      unwrap(
        await cloud.removeTarget(
          request.auth,
          locationOf(request),
          request.params.load_balancer_uuid,
          request.params.target_uuid,
        ),
      ),
  );

  app.post(
    "/network/load_balancers/:load_balancer_uuid/forwarding_rules",
    {
      schema: {
        ...doc("addForwardingRule", "load balancers", "Add a forwarding rule"),
        params: LbParams,
        body: S.RuleBody,
        response: { ...cloudErrorResponses, 200: S.RuleView },
      },
    },
    async (request) =>
      unwrap(
        await cloud.addRule(
          request.auth,
          locationOf(request),
          request.params.load_balancer_uuid,
          request.body,
        ),
      ),
  );

  app.delete(
    "/network/load_balancers/:load_balancer_uuid/forwarding_rules/:rule_uuid",
    {
      schema: {
        ...doc("removeForwardingRule", "load balancers", "Remove a forwarding rule"),
        params: params({ load_balancer_uuid: Uuid, rule_uuid: Uuid }),
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) =>
      unwrap(
        await cloud.removeRule(
          request.auth,
          locationOf(request),
          request.params.load_balancer_uuid,
          request.params.rule_uuid,
        ),
      ),
  );

  // Object storage

  app.get(
    "/storage/user",
    {
      schema: {
        ...doc(
          "getS3User",
          "object storage",
          "The object-storage user with its keys (created on first call by a write-capable key)",
        ),
        ...noParams,
        response: { ...cloudErrorResponses, 200: S.S3UserView },
      },
    },
    async (request) => unwrap(await cloud.s3User(request.auth)),
  );

  app.get(
    "/storage/user/keys",
    {
      schema: {
        ...doc("listS3Keys", "object storage", "List object-storage keys"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.S3KeyView) },
      },
    },
    async (request) => cloud.s3Keys(request.auth),
  );

  app.post(
    "/storage/user/keys",
    {
      schema: {
        ...doc("createS3Key", "object storage", "Generate one more key pair; returns all keys"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.S3KeyView) },
      },
    },
    async (request) => cloud.createS3Key(request.auth),
  );

  app.delete(
    "/storage/user/keys",
    {
      schema: {
        ...doc("deleteS3Key", "object storage", "Delete a key pair (access_key in the form, JSON or query)"),
        ...noParams,
        body: S.AccessKeyBody,
        querystring: S.AccessKeyBody,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const accessKey = request.body.access_key ?? request.query.access_key;
      if (!accessKey)
        throw ApiError.field("access_key", "validation_required", "The access_key field is required.");
      return unwrap(await cloud.deleteS3Key(request.auth, accessKey));
    },
  );

  app.get(
    "/storage/api/s3",
    {
      schema: {
        ...doc("getS3Endpoint", "object storage", "The S3 endpoint URL"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: S.S3Info },
      },
    },
    async (request) => ({ url: cloud.s3Url(`${request.protocol}://${request.host}`) }),
  );
};
