import { randomUUID } from "node:crypto";

export const FAULT_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
/** What a rule hits: API requests, webhook deliveries, or video processing. */
export const FAULT_TARGETS = ["http", "webhook", "video"] as const;
export const FAULT_VIDEO_STAGES = ["transcoding", "packaging"] as const;
export type FaultTarget = (typeof FAULT_TARGETS)[number];
export type FaultVideoStage = (typeof FAULT_VIDEO_STAGES)[number];

/** What a fault rule matches and what it does; every matching field must match. */
export interface FaultRuleInput {
  /** Default `http`. */
  target?: FaultTarget;
  /**
   * A route template as registered, e.g. `/v1/media/libraries/:libraryId/videos`, or as
   * `/openapi.json` names it (`{libraryId}`); parameter names and a trailing slash do not matter.
   */
  route?: string;
  /** Or any path starting with this. */
  path_prefix?: string;
  method?: (typeof FAULT_METHODS)[number];
  organization_id?: string;
  /** Answer this status with the group's error body instead of running the operation. */
  status?: number;
  /** Wait this long before going on (with `status`, before answering it). */
  latency_ms?: number;
  /** Webhook rules: deliveries to URLs starting with this. */
  url_prefix?: string;
  /** Webhook rules: the delivery times out instead of answering `status`. */
  timeout?: boolean;
  /** Video rules: only this library or video. */
  library_id?: string;
  video_id?: string;
  /** Video rules: the stage at which processing fails. */
  stage?: FaultVideoStage;
  /** Video rules: processing stops at the stage (the video stays there) instead of failing. */
  stop?: boolean;
  /** Chance that a matching request is hit (0-1, default 1). */
  probability?: number;
  /** How many requests it hits before it goes away (default: until removed). */
  count?: number;
}

export interface FaultRule extends FaultRuleInput {
  id: string;
  target: FaultTarget;
  probability: number;
  /** Hits left; null: until removed. */
  remaining: number | null;
  hits: number;
}

export interface RequestFacts {
  route: string | undefined;
  path: string;
  method: string;
  organizationId: string | undefined;
}

/**
 * Fault rules of this process (not shared between nodes: developer mode runs one process). `take`
 * decides for one request and counts the hit.
 */
export class FaultRules {
  readonly #rules = new Map<string, FaultRule>();
  constructor(private readonly random: () => number = Math.random) {}

  add(input: FaultRuleInput): FaultRule {
    const rule: FaultRule = {
      ...input,
      id: randomUUID(),
      target: input.target ?? "http",
      probability: input.probability ?? 1,
      remaining: input.count ?? null,
      hits: 0,
    };
    this.#rules.set(rule.id, rule);
    return rule;
  }

  list(): FaultRule[] {
    return [...this.#rules.values()];
  }

  remove(id: string): boolean {
    return this.#rules.delete(id);
  }

  clear(): void {
    this.#rules.clear();
  }

  /** The first rule that hits this request, if any. */
  take(request: RequestFacts): FaultRule | undefined {
    return this.#take("http", (rule) => matches(rule, request));
  }

  /** The first rule that hits a webhook delivery to this URL, if any. */
  takeWebhook(url: string): FaultRule | undefined {
    return this.#take("webhook", (rule) => rule.url_prefix === undefined || url.startsWith(rule.url_prefix));
  }

  /** The first rule that fails this video's processing at this stage, if any. */
  takeVideo(video: { libraryId: string; videoId: string }, stage: FaultVideoStage): FaultRule | undefined {
    return this.#take(
      "video",
      (rule) =>
        rule.stage === stage &&
        (rule.library_id === undefined || rule.library_id === video.libraryId) &&
        (rule.video_id === undefined || rule.video_id === video.videoId),
    );
  }

  #take(target: FaultTarget, matching: (rule: FaultRule) => boolean): FaultRule | undefined {
    for (const rule of this.#rules.values()) {
      if (rule.target !== target || !matching(rule) || this.random() >= rule.probability) continue;
      rule.hits++;
      if (rule.remaining !== null && --rule.remaining <= 0) this.#rules.delete(rule.id);
      return rule;
    }
    return undefined;
  }
}

/**
 * Failures some routes answer with a body of their own rather than their group's error body
 * (CONTRACT.md 8: the livestream health check's 503; 5: a credential check whose provider is away
 * answers 502 `{}`). An injected one looks the same, as /openapi.json documents it.
 */
const OWN_FAILURE_BODIES: Record<string, Record<number, object>> = {
  "/v1/livestream/health": { 503: { status: "unhealthy" } },
  "/v1/media/libraries/:libraryId/migration-jobs/validate": { 502: {} },
};

/** The body a route answers `status` with where it is not its group's error body. */
export const ownFailureBody = (route: string | undefined, status: number): object | undefined =>
  route === undefined ? undefined : OWN_FAILURE_BODIES[route]?.[status];

/** A route template as Fastify registers it: `{name}` parameters (OpenAPI's spelling) as `:name`. */
export const registeredTemplate = (route: string): string =>
  route.replace(/\{([^/{}]+)\}/g, ":$1").replace(/(.)\/$/, "$1");

/** One spelling of a route template for comparing: parameters unnamed, no trailing slash. */
const routeShape = (route: string): string => registeredTemplate(route).replace(/\/:[^/]+/g, "/:");

function matches(rule: FaultRule, request: RequestFacts): boolean {
  return (
    (rule.route === undefined ||
      (request.route !== undefined && routeShape(rule.route) === routeShape(request.route))) &&
    (rule.path_prefix === undefined || request.path.startsWith(rule.path_prefix)) &&
    (rule.method === undefined || rule.method === request.method) &&
    (rule.organization_id === undefined || rule.organization_id === request.organizationId)
  );
}
