import { type Static, Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import type { IdentityService } from "../identity/service.ts";
import { isUniqueViolation } from "../store/transactions.ts";

const Body = Type.Record(Type.String(), Type.Unknown());

/** A known world: organizations with their keys and resources, each made through the public API. */
export const SeedBody = Type.Object({
  organizations: Type.Array(
    Type.Object({
      name: Type.String({ minLength: 1, maxLength: 200 }),
      /** The organization's admin key (the same rule as CUMULO_BOOTSTRAP_API_KEY); generated when absent. */
      api_key: Type.Optional(Type.String({ pattern: "^[A-Za-z0-9_-]{20,200}$" })),
      keys: Type.Optional(
        Type.Array(
          Type.Object({ name: Type.String({ minLength: 1 }), read_only: Type.Optional(Type.Boolean()) }),
        ),
      ),
      /** Bodies of `POST /v1/media/libraries`, each with its videos (bodies of `POST …/videos`). */
      libraries: Type.Optional(
        Type.Array(Type.Intersect([Body, Type.Object({ videos: Type.Optional(Type.Array(Body)) })])),
      ),
      /** Bodies of `POST /v1/cdn/distributions`. */
      distributions: Type.Optional(Type.Array(Body)),
      /** Any other call as this organization, e.g. cloud resources: `{method, path, body}`. */
      requests: Type.Optional(
        Type.Array(
          Type.Object({
            method: Type.String({ pattern: "^(POST|PUT|PATCH|DELETE)$" }),
            path: Type.String({ pattern: "^/v1/" }),
            body: Type.Optional(Body),
          }),
        ),
      ),
    }),
  ),
});
export type SeedBody = Static<typeof SeedBody>;

type Sent = { statusCode: number; json(): unknown };

export type SeedOutcome =
  | { outcome: "seeded"; organizations: unknown[] }
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
 */
export async function seedWorld(
  app: FastifyInstance,
  identity: IdentityService,
  seed: SeedBody,
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
      headers: cloud ? { apikey: key } : { authorization: `Bearer ${key}` },
      ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
    });
    const answer = response.json() as { data?: { id?: string } } & Record<string, unknown>;
    if (response.statusCode >= 300) throw new StepFailed(step, response.statusCode, answer);
    return answer;
  };
  try {
    const organizations: unknown[] = [];
    for (const [o, org] of seed.organizations.entries()) {
      const created = await identity.createOrganization(org.name, org.api_key).catch((error: unknown) => {
        if (!isUniqueViolation(error)) throw error;
        throw new StepFailed(`organizations[${o}].api_key`, 409, "This key is already in use");
      });
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
        const made = (await call(at, key, "POST", "/v1/media/libraries", library)).data ?? {};
        const madeVideos = [];
        for (const [v, video] of (videos ?? []).entries()) {
          const url = `/v1/media/libraries/${made.id}/videos`;
          madeVideos.push((await call(`${at}.videos[${v}]`, key, "POST", url, video)).data);
        }
        libraries.push({ ...made, videos: madeVideos });
      }
      const distributions = [];
      for (const [d, distribution] of (org.distributions ?? []).entries()) {
        const at = `organizations[${o}].distributions[${d}]`;
        distributions.push((await call(at, key, "POST", "/v1/cdn/distributions", distribution)).data);
      }
      const requests = [];
      for (const [r, request] of (org.requests ?? []).entries()) {
        const at = `organizations[${o}].requests[${r}]`;
        const cloud = !request.path.startsWith("/v1/media") && !request.path.startsWith("/v1/cdn");
        requests.push(await call(at, key, request.method, request.path, request.body ?? {}, cloud));
      }
      organizations.push({
        id: created.organization_id,
        name: org.name,
        api_key: key,
        keys,
        libraries,
        distributions,
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
