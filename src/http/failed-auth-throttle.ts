import type { FastifyInstance, FastifyRequest } from "fastify";
import { type Bus, unlessBusUnavailable } from "../bus.ts";
import type { RateLimitSetting } from "../config.ts";
import { hashSecret } from "../identity/keys.ts";
import { clientNetwork, isLoopback } from "./client-address.ts";
import { tooManyRequests } from "./rate-limit.ts";

/** Bus channel: an address spent its budget of wrong keys (`ThrottledAddress`). */
export const FAILED_AUTH_CHANNEL = "http.failed-auth-throttled";

interface ThrottledAddress {
  network: string;
  /** What is left of the window, so each node's own clock sets the end (nodes' clocks differ). */
  remainingMs: number;
}

declare module "fastify" {
  interface FastifyInstance {
    failedAuth: FailedAuthThrottle;
  }
}

/**
 * Slows API key guessing (docs/security.md). Wrong keys are counted per client network
 * (`clientNetwork`) in the rate limit's store, shared through Redis as the per-key budgets are; a
 * key sent again is not counted again, since repeating it learns nothing (a client retrying with a
 * revoked key is no guesser). Once an address has sent the budget's number of distinct wrong keys
 * in the window, every node answers 429 to all its authenticated requests, a right key's included,
 * until the window ends: a guess that happens to be right is then not told apart from a wrong one.
 * Refusing is decided from memory the nodes tell each other about on the bus, so a request with a
 * right key pays one map lookup, and none while no address is throttled.
 */
export class FailedAuthThrottle {
  readonly #throttledUntil = new Map<string, number>();
  readonly #countWrongKey: ReturnType<FastifyInstance["createRateLimit"]>;
  readonly #firstTimeOfKey: ReturnType<FastifyInstance["createRateLimit"]>;

  private constructor(
    app: FastifyInstance,
    private readonly setting: RateLimitSetting,
    private readonly bus: Bus,
    private readonly onRefused: () => void,
  ) {
    const wrongKeyOf = (request: FastifyRequest) => (request as WithWrongKey)[WRONG_KEY] ?? "";
    this.#countWrongKey = app.createRateLimit({
      max: setting.max,
      timeWindow: setting.windowMs,
      keyGenerator: (request) => `failed-auth:${clientNetwork(request.ip)}`,
    });
    // Budget 1: over it means this address already sent this key in the window.
    this.#firstTimeOfKey = app.createRateLimit({
      max: 1,
      timeWindow: setting.windowMs,
      // An address never holds a space, so the key names one pair.
      keyGenerator: (request) => `failed-auth:key:${clientNetwork(request.ip)} ${wrongKeyOf(request)}`,
    });
  }

  /** Made once the rate limit plugin is registered on `app` (its store counts). */
  static async create(
    app: FastifyInstance,
    setting: RateLimitSetting,
    bus: Bus,
    onRefused: () => void,
  ): Promise<FailedAuthThrottle> {
    const throttle = new FailedAuthThrottle(app, setting, bus, onRefused);
    // With Redis away the bus subscribes once it is back; this node hears its own messages meanwhile.
    await bus
      .subscribe(FAILED_AUTH_CHANNEL, (message) => {
        const { network, remainingMs } = JSON.parse(message) as ThrottledAddress;
        throttle.#throttle(network, remainingMs);
      })
      .catch(unlessBusUnavailable);
    return throttle;
  }

  #throttle(network: string, remainingMs: number): void {
    const now = Date.now();
    // Whatever has ended goes: the map holds only the addresses throttled now.
    for (const [known, until] of this.#throttledUntil) if (until <= now) this.#throttledUntil.delete(known);
    this.#throttledUntil.set(network, now + remainingMs);
  }

  /** The 429 for a throttled request's address, until its window ends; before any key is looked at. */
  refuseIfThrottled(request: FastifyRequest): void {
    if (this.#throttledUntil.size === 0) return;
    const network = clientNetwork(request.ip);
    const until = this.#throttledUntil.get(network);
    if (until === undefined) return;
    const remainingMs = until - Date.now();
    if (remainingMs <= 0) {
      this.#throttledUntil.delete(network);
      return;
    }
    this.onRefused();
    throw tooManyRequests(this.setting.max, Math.ceil(remainingMs / 1000));
  }

  /**
   * Counts `secret`, a key that authenticated nobody, against the request's address; once the
   * address's budget is spent, every node is told and the request is refused with 429.
   */
  async countWrongKey(request: FastifyRequest, secret: string): Promise<void> {
    // The machine itself (a developer's test suite, a health check, a proxy not named in
    // CUMULO_TRUST_PROXY) is not a guesser to lock out: locking it out would refuse every client behind it.
    if (isLoopback(request.ip)) return;
    (request as WithWrongKey)[WRONG_KEY] = hashSecret(secret);
    const first = await this.#firstTimeOfKey(request);
    if (first.isAllowed || first.isExceeded) return;
    const count = await this.#countWrongKey(request);
    if (count.isAllowed || !count.isExceeded) return;
    const message: ThrottledAddress = { network: clientNetwork(request.ip), remainingMs: count.ttl };
    // This node's handler runs inside `publish`; a node Redis could not reach learns of the address
    // at the first wrong key it is sent from there.
    await this.bus.publish(FAILED_AUTH_CHANNEL, JSON.stringify(message)).catch(unlessBusUnavailable);
    this.refuseIfThrottled(request);
  }
}

/** Where `countWrongKey` leaves the key's hash for its limiter's key generator, which sees only the request. */
const WRONG_KEY = Symbol("wrongKey");
type WithWrongKey = FastifyRequest & { [WRONG_KEY]?: string };
