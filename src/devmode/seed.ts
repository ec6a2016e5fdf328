import { type Static, Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import type { FastifyInstance } from "fastify";
import { parse as parseYaml } from "yaml";
import { Distribution } from "../cdn/schemas.ts";
import { DiskView, FloatingIpView, LoadBalancerView, VmView } from "../cloud/schemas.ts";
import { isCloudPath } from "../http/auth.ts";
import { expecting, NonBlankString, Uuid } from "../http/schemas.ts";
import { selfRequestHeaders } from "../http/self-requests.ts";
import { API_KEY_NAME_MAX, ORGANIZATION_NAME_MAX } from "../identity/keys.ts";
import type { IdentityService } from "../identity/service.ts";
import { Library, Video } from "../media/schemas.ts";
import { isUniqueViolation } from "../store/transactions.ts";
import type { StateService } from "./state-service.ts";

/** Cloud resources a seed can name, and the route each is created by. */
const CLOUD_RESOURCES = {
  vms: "/v1/user-resource/vm",
  disks: "/v1/storage/disks",
  floating_ips: "/v1/network/ip_addresses",
  load_balancers: "/v1/network/load_balancers",
} as const;

const Body = Type.Record(Type.String(), Type.Unknown());

/** A known world: organizations with their keys and resources, each made through the public API. */
export const SeedBody = Type.Object({
  organizations: Type.Array(
    Type.Object({
      // The CLI's and the API's rules for the same names.
      name: NonBlankString(ORGANIZATION_NAME_MAX),
      /** The organization's admin key (the same rule as CUMULO_BOOTSTRAP_API_KEY); generated when absent. */
      api_key: Type.Optional(
        Type.String({
          pattern: "^[A-Za-z0-9_-]{20,200}$",
          ...expecting("20 to 200 letters, digits, _ or -"),
        }),
      ),
      keys: Type.Optional(
        Type.Array(
          Type.Object({ name: NonBlankString(API_KEY_NAME_MAX), read_only: Type.Optional(Type.Boolean()) }),
        ),
      ),
      /**
       * Bodies of `POST /v1/media/libraries`, each with its videos (bodies of `POST …/videos`; with
       * `source: "placeholder"` the placeholder MP4 is then uploaded as the video's source).
       */
      libraries: Type.Optional(
        Type.Array(
          Type.Intersect([
            Body,
            Type.Object({
              videos: Type.Optional(
                Type.Array(
                  Type.Intersect([Body, Type.Object({ source: Type.Optional(Type.Literal("placeholder")) })]),
                ),
              ),
            }),
          ]),
        ),
      ),
      /** Bodies of `POST /v1/cdn/distributions`. */
      distributions: Type.Optional(Type.Array(Body)),
      /** Bodies of the cloud API's create calls, by resource (see CLOUD_RESOURCES), made in this order. */
      cloud: Type.Optional(
        Type.Object(
          {
            vms: Type.Optional(Type.Array(Body)),
            disks: Type.Optional(Type.Array(Body)),
            floating_ips: Type.Optional(Type.Array(Body)),
            load_balancers: Type.Optional(Type.Array(Body)),
          },
          { additionalProperties: false },
        ),
      ),
      /** Any other call as this organization, e.g. cloud resources: `{method, path, body}`. */
      requests: Type.Optional(
        Type.Array(
          Type.Object({
            method: Type.String({
              pattern: "^(POST|PUT|PATCH|DELETE)$",
              ...expecting("POST, PUT, PATCH or DELETE"),
            }),
            // No dot segment: `/v1/../_cumulo/...` passed the prefix and reached developer mode's routes.
            path: Type.String({
              pattern: "^/v1(?!.*/(?:\\.|%2[eE]){1,2}(?:/|$|\\?))/",
              ...expecting("an API path starting with /v1/, without . or .. segments"),
            }),
            body: Type.Optional(Body),
          }),
        ),
      ),
    }),
  ),
});
export type SeedBody = Static<typeof SeedBody>;

/**
 * What a seed made, for each organization of the seed in its order: typed, so that a test harness
 * reads ids and key secrets (`organizations[0].api_key`) through the typed client.
 */
export const SeededOrganization = Type.Object({
  id: Uuid,
  name: Type.String(),
  /** The organization's admin key: the seed's `api_key`, or the one generated. */
  api_key: Type.String(),
  keys: Type.Array(Type.Object({ id: Type.Integer(), name: Type.String(), api_key: Type.String() })),
  /** Each library as created, with its videos (a `source: placeholder` one as its upload left it). */
  libraries: Type.Array(Type.Composite([Library, Type.Object({ videos: Type.Array(Video) })])),
  distributions: Type.Array(Distribution),
  /** The cloud resources made, under the seed's names; a kind the seed did not name is absent. */
  cloud: Type.Object({
    vms: Type.Optional(Type.Array(VmView)),
    disks: Type.Optional(Type.Array(DiskView)),
    floating_ips: Type.Optional(Type.Array(FloatingIpView)),
    load_balancers: Type.Optional(Type.Array(LoadBalancerView)),
  }),
  /** The answer of each of the seed's `requests`, as that route answered it. */
  requests: Type.Array(Type.Unknown()),
});
export type SeededOrganization = Static<typeof SeededOrganization>;

type Sent = { statusCode: number; json(): unknown };

/** The `data` of a media or CDN route's answer, in the shape that route's answer schema gave it. */
const dataOf = <T>(answer: { data?: unknown }): T => answer.data as T;

export type SeedOutcome =
  | { outcome: "seeded"; organizations: SeededOrganization[] }
  | { outcome: "failed"; step: string; status: number; answer: unknown };

/** Thrown inside the seed to stop at the first refused call; the caller restores the store. */
class StepFailed extends Error {
  constructor(
    readonly step: string,
    readonly status: number,
    readonly answer: unknown,
  ) {
    super(step);
  }
}

/**
 * Makes the world through the API itself (`inject`: routes, validation and services, so every rule
 * holds), organizations and keys through the identity service. Stops at the first refused call.
 * Everything it makes belongs to the organizations it made, whose ids it adds to `made`.
 */
async function seedWorld(
  app: FastifyInstance,
  identity: IdentityService,
  seed: SeedBody,
  placeholderVideo: () => Promise<Buffer>,
  made: string[],
): Promise<SeedOutcome> {
  const call = async (
    step: string,
    key: string,
    method: string,
    url: string,
    body: unknown,
    cloud = false,
  ) => {
    const response: Sent = await app.inject({
      method: method as "POST",
      url,
      headers: { ...(cloud ? { apikey: key } : { authorization: `Bearer ${key}` }), ...selfRequestHeaders() },
      ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
    });
    const answer = response.json() as { data?: { id?: string } } & Record<string, unknown>;
    if (response.statusCode >= 300) throw new StepFailed(step, response.statusCode, answer);
    return answer;
  };
  try {
    const organizations: SeededOrganization[] = [];
    for (const [o, org] of seed.organizations.entries()) {
      const created = await identity.createOrganization(org.name, org.api_key).catch((error: unknown) => {
        if (!isUniqueViolation(error)) throw error;
        throw new StepFailed(`organizations[${o}].api_key`, 409, "This key is already in use");
      });
      made.push(created.organization_id);
      const key = created.api_key;
      const keys = [];
      for (const extra of org.keys ?? []) {
        const made = await identity.createApiKey(created.organization_id, {
          name: extra.name,
          readOnly: extra.read_only ?? false,
        });
        if (made.outcome === "created") keys.push({ id: made.id, name: extra.name, api_key: made.api_key });
      }
      const libraries = [];
      for (const [l, { videos, ...library }] of (org.libraries ?? []).entries()) {
        const at = `organizations[${o}].libraries[${l}]`;
        const made = dataOf<Library>(await call(at, key, "POST", "/v1/media/libraries", library));
        const madeVideos = [];
        for (const [v, { source, ...video }] of (videos ?? []).entries()) {
          const url = `/v1/media/libraries/${made.id}/videos`;
          const madeVideo = dataOf<Video>(await call(`${at}.videos[${v}]`, key, "POST", url, video));
          if (source === "placeholder") {
            const uploaded: Sent = await app.inject({
              method: "PUT",
              url: `${url}/${madeVideo.id}/source`,
              headers: {
                authorization: `Bearer ${key}`,
                "content-type": "video/mp4",
                ...selfRequestHeaders(),
              },
              payload: await placeholderVideo(),
            });
            const answer = uploaded.json() as { data?: Video };
            if (uploaded.statusCode >= 300) {
              throw new StepFailed(`${at}.videos[${v}].source`, uploaded.statusCode, answer);
            }
            madeVideos.push(answer.data ?? madeVideo);
          } else madeVideos.push(madeVideo);
        }
        libraries.push({ ...made, videos: madeVideos });
      }
      const distributions = [];
      for (const [d, distribution] of (org.distributions ?? []).entries()) {
        const at = `organizations[${o}].distributions[${d}]`;
        distributions.push(
          dataOf<Distribution>(await call(at, key, "POST", "/v1/cdn/distributions", distribution)),
        );
      }
      const cloud: Record<string, unknown[]> = {};
      for (const [resource, path] of Object.entries(CLOUD_RESOURCES)) {
        // A kind the seed names is answered, as an empty list when it was given none.
        const bodies = org.cloud?.[resource as keyof typeof CLOUD_RESOURCES];
        if (bodies === undefined) continue;
        cloud[resource] = [];
        for (const [c, body] of bodies.entries()) {
          const at = `organizations[${o}].cloud.${resource}[${c}]`;
          cloud[resource].push(await call(at, key, "POST", path, body, true));
        }
      }
      const requests = [];
      for (const [r, request] of (org.requests ?? []).entries()) {
        const at = `organizations[${o}].requests[${r}]`;
        // The header the route's group takes: `apikey` for cloud routes, a bearer key for the others
        // (media, CDN, livestream, the organization's own routes such as /v1/organization/api-keys).
        const cloud = isCloudPath(request.path);
        requests.push(await call(at, key, request.method, request.path, request.body ?? {}, cloud));
      }
      organizations.push({
        id: created.organization_id,
        name: org.name,
        api_key: key,
        keys,
        libraries,
        distributions,
        // Each list holds the answers of its resource's create route (CLOUD_RESOURCES).
        cloud: cloud as SeededOrganization["cloud"],
        requests,
      });
    }
    return { outcome: "seeded", organizations };
  } catch (error) {
    if (error instanceof StepFailed) {
      return { outcome: "failed", step: error.step, status: error.status, answer: error.answer };
    }
    throw error;
  }
}

/**
 * Seeds all or nothing: when a call is refused, the organizations the seed made are removed whole
 * (everything it made is theirs), and other clients' changes meanwhile stay.
 */
export function seedAtomically(
  app: FastifyInstance,
  state: StateService,
  identity: IdentityService,
  seed: SeedBody,
  placeholderVideo: () => Promise<Buffer>,
): Promise<SeedOutcome> {
  return state.withRollback((made) => seedWorld(app, identity, seed, placeholderVideo, made));
}

/** Media types of a YAML seed; anything else is read as JSON. */
export const YAML_TYPES = ["application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"];

/** A seed file's text: YAML when the name ends `.yaml`/`.yml`, JSON when `.json`. */
export function readSeedFile(name: string, text: string): { seed: SeedBody } | { problem: string } {
  const yaml = /\.ya?ml$/i.test(name);
  if (!yaml && !/\.json$/i.test(name))
    return { problem: `${name}: a seed file ends in .json, .yaml or .yml` };
  let parsed: unknown;
  try {
    parsed = yaml ? parseYaml(text) : JSON.parse(text);
  } catch (error) {
    return { problem: `${name}: not valid ${yaml ? "YAML" : "JSON"}: ${(error as Error).message}` };
  }
  const [first] = Value.Errors(SeedBody, parsed);
  if (first) return { problem: `${name}: ${first.path || "/"} ${first.message}` };
  return { seed: parsed as SeedBody };
}
