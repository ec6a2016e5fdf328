import type { FastifyBaseLogger } from "fastify";
import type { Bus } from "../bus.ts";
import type { Clock } from "../clock.ts";
import type { BackgroundWorker } from "../services.ts";
import { readJson } from "../store/codec.ts";
import type { ClaimedDelivery, DeliveryRepository } from "./delivery-repository.ts";
import type { WebhookEmitter } from "./emitter.ts";
import { nextRetryDelayMs, parseRetryAfter, type RetryPolicy } from "./schedule.ts";
import type { DeliveryOutcome, WebhookSender } from "./sender.ts";

export interface DispatcherOptions {
  /** Attempts in flight in this process; an endpoint's second and later ones may use only half. */
  concurrency: number;
  /** Attempts in flight to one endpoint from this process. */
  perEndpoint: number;
  /** Fallback poll: work queued by other processes, leases that ran out. */
  pollMs: number;
  /** How long a claim is ours; longer than an attempt can take (the send timeout). */
  leaseMs: number;
  random?: () => number;
  /** Told each attempt's receiver status (0: no answer), success and duration (metrics). */
  onAttempt?: (status: number, success: boolean, milliseconds: number) => void;
}

/** Bus channel on which a notification anywhere wakes every node's dispatcher. */
export const WEBHOOK_WAKE_CHANNEL = "webhooks.wake";

/**
 * Passes this process's `emitter.notify()` to every node (through Redis when configured), so a
 * notification committed by an api-only node wakes the worker nodes at once instead of at their next poll.
 */
export function relayWakeups(emitter: WebhookEmitter, bus: Bus, logger: FastifyBaseLogger): void {
  emitter.onWake(() => {
    bus
      .publish(WEBHOOK_WAKE_CHANNEL, "")
      .catch((error: unknown) => logger.warn({ err: error }, "webhook wake-up not published"));
  });
}

/** Attempts claimed in one transaction. */
const CLAIM_BATCH = 32;

/** Longest wait a Retry-After may impose (a day); longer values are treated as this. */
const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;

/**
 * Sends webhook attempts: claims due ones from the store, sends them, records each outcome and
 * schedules the next attempt. Wakes at once on `emitter.notify()`, at the due time of the earliest
 * retry it knows of, and on a fallback poll.
 */
export class WebhookDispatcher implements BackgroundWorker {
  readonly name = "webhook-dispatcher";
  readonly #inFlight = new Set<Promise<void>>();
  readonly #perEndpoint = new Map<string, number>();
  #poll: NodeJS.Timeout | undefined;
  #alarm: { at: number; timer: NodeJS.Timeout } | undefined;
  #stopWake: (() => void) | undefined;
  #running = false;
  #claiming: Promise<void> | undefined;
  #ticking = false;
  #tickAgain = false;

  /** Developer mode's fault rules: an outcome here replaces sending the delivery. */
  injectFault: ((url: string) => DeliveryOutcome | undefined) | undefined;

  constructor(
    private readonly deliveries: DeliveryRepository,
    private readonly emitter: WebhookEmitter,
    private readonly bus: Bus,
    private readonly sender: WebhookSender,
    private readonly clock: Clock,
    private readonly logger: FastifyBaseLogger,
    private readonly options: DispatcherOptions,
  ) {}

  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    this.#stopWake = this.emitter.onWake(() => this.#tick());
    // The bus has no unsubscribe; after stop() a wake-up finds the dispatcher not running and is ignored.
    await this.bus
      .subscribe(WEBHOOK_WAKE_CHANNEL, () => this.#tick())
      .catch((error: unknown) =>
        this.logger.warn({ err: error }, "webhook wake-ups from other nodes unavailable"),
      );
    this.#poll = setInterval(() => this.#tick(), this.options.pollMs);
    this.#poll.unref();
    this.#tick();
  }

  /** Stops claiming and finishes the attempts in hand; claims it never got to expire and are retaken. */
  async stop(): Promise<void> {
    this.#running = false;
    clearInterval(this.#poll);
    if (this.#alarm) clearTimeout(this.#alarm.timer);
    this.#alarm = undefined;
    this.#stopWake?.();
    await this.#claiming;
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
    await this.sender.close();
  }

  #tick(): void {
    if (!this.#running) return;
    if (this.#ticking) {
      this.#tickAgain = true;
      return;
    }
    this.#ticking = true;
    this.#claiming = this.#claim()
      .catch((error: unknown) => this.logger.error({ err: error }, "webhook claim failed"))
      .finally(() => {
        this.#ticking = false;
        this.#claiming = undefined;
        if (this.#tickAgain) {
          this.#tickAgain = false;
          this.#tick();
        }
      });
  }

  /** Wakes at `at` (ms) if that is sooner than anything already planned and than the next poll. */
  #wakeAt(at: number): void {
    if (!this.#running) return;
    const delay = Math.max(0, at - this.clock.now().getTime());
    if (delay >= this.options.pollMs) return;
    if (this.#alarm && this.#alarm.at <= at) return;
    if (this.#alarm) clearTimeout(this.#alarm.timer);
    const timer = setTimeout(() => {
      this.#alarm = undefined;
      this.#tick();
    }, delay + 5);
    timer.unref();
    this.#alarm = { at, timer };
  }

  async #claim(): Promise<void> {
    // Claims go in small batches: the candidate scan stays short, and a full batch claims again at once.
    const free = Math.min(this.options.concurrency - this.#inFlight.size, CLAIM_BATCH);
    if (free <= 0) return;
    const now = this.clock.now();
    const taken = new Map<string, number>();
    let takenTotal = 0;
    // Fairness: half the slots are kept for endpoints with nothing in flight, so slow endpoints holding
    // their attempts open (up to `perEndpoint` each) cannot take every slot from the fast ones.
    const mayTakeAnother = (inFlightToEndpoint: number) =>
      inFlightToEndpoint < this.options.perEndpoint &&
      (inFlightToEndpoint === 0 || this.#inFlight.size + takenTotal < this.options.concurrency / 2);
    const claimed = await this.deliveries.claim(
      now.toISOString(),
      new Date(now.getTime() + this.options.leaseMs).toISOString(),
      free,
      [...this.#perEndpoint].filter(([, count]) => !mayTakeAnother(count)).map(([id]) => id),
      (endpointId) => {
        const count = (this.#perEndpoint.get(endpointId) ?? 0) + (taken.get(endpointId) ?? 0);
        if (!mayTakeAnother(count)) return false;
        taken.set(endpointId, (taken.get(endpointId) ?? 0) + 1);
        takenTotal++;
        return true;
      },
    );
    for (const delivery of claimed) {
      this.#perEndpoint.set(delivery.endpoint_id, (this.#perEndpoint.get(delivery.endpoint_id) ?? 0) + 1);
      const run = this.#deliver(delivery)
        .catch((error: unknown) =>
          this.logger.error({ err: error, deliveryId: delivery.id }, "webhook delivery failed to record"),
        )
        .finally(() => {
          this.#inFlight.delete(run);
          const left = (this.#perEndpoint.get(delivery.endpoint_id) ?? 1) - 1;
          if (left > 0) this.#perEndpoint.set(delivery.endpoint_id, left);
          else this.#perEndpoint.delete(delivery.endpoint_id);
          this.#tick();
        });
      this.#inFlight.add(run);
    }
    if (claimed.length === free) this.#tickAgain = true;
    if (claimed.length === 0) {
      // Due work left unclaimed is held back by a concurrency limit: a finishing attempt wakes us.
      const due = await this.deliveries.nextDue();
      if (due && Date.parse(due) > now.getTime()) this.#wakeAt(Date.parse(due));
    }
  }

  async #deliver(delivery: ClaimedDelivery): Promise<void> {
    // A switched-off endpoint gets nothing scheduled; tests and retries asked for by hand still go.
    if (!delivery.is_active && !delivery.manual && delivery.event !== "test") {
      await this.deliveries.drop(delivery);
      return;
    }
    const at = this.clock.now();
    const outcome =
      this.injectFault?.(delivery.url) ??
      (await this.sender.send(
        {
          url: delivery.url,
          messageId: delivery.message_id,
          body: delivery.body,
          secret: delivery.secret,
          headers: readJson<Record<string, string>>(delivery.headers),
        },
        at,
      ));
    this.options.onAttempt?.(outcome.status, outcome.success, outcome.durationMs);
    const policy = readJson<RetryPolicy>(delivery.retry_policy);
    const result = await this.deliveries.record(
      delivery,
      {
        success: outcome.success,
        response_status: outcome.status,
        response_body: outcome.body,
        error: outcome.error,
        duration_ms: outcome.durationMs,
        attempted_at: at.toISOString(),
      },
      (made) => this.#plan(outcome, policy, made),
    );
    if (result.nextRetryAt) this.#wakeAt(Date.parse(result.nextRetryAt));
  }

  #plan(outcome: DeliveryOutcome, policy: RetryPolicy | null, made: number) {
    if (outcome.success) return { nextRetryAt: undefined, deactivateEndpoint: false };
    if (outcome.status === 410) return { nextRetryAt: undefined, deactivateEndpoint: true };
    let delay = nextRetryDelayMs(policy, made, this.options.random);
    if (delay === undefined) return { nextRetryAt: undefined, deactivateEndpoint: false };
    const now = this.clock.now();
    if (outcome.status === 429 || outcome.status === 503) {
      const asked = parseRetryAfter(outcome.retryAfter, now);
      if (asked !== undefined && asked > delay) delay = Math.min(asked, MAX_RETRY_AFTER_MS);
    }
    return { nextRetryAt: new Date(now.getTime() + delay).toISOString(), deactivateEndpoint: false };
  }
}
