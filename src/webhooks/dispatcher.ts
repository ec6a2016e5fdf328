import type { FastifyBaseLogger } from "fastify";
import { LRUCache } from "lru-cache";
import type { Bus } from "../bus.ts";
import { type Clock, laterBy } from "../clock.ts";
import type { BackgroundWorker } from "../services.ts";
import { readJson } from "../store/codec.ts";
import { OutageLog } from "../store/unavailable.ts";
import type {
  ClaimedDelivery,
  DeliveryRepository,
  FinishedAttempt,
  RecordResult,
} from "./delivery-repository.ts";
import type { WebhookEmitter } from "./emitter.ts";
import { nextRetryDelayMs, parseRetryAfter, type RetryPolicy } from "./schedule.ts";
import type { EndpointHeaders, SealedHeaders } from "./sealed-headers.ts";
import type { SigningSecrets } from "./secrets.ts";
import type { DeliveryOutcome, WebhookSender } from "./sender.ts";

export interface DispatcherOptions {
  /**
   * Attempts claimed by this process (being sent or waiting for their endpoint's turn); an
   * endpoint's second and later ones may use only half. Slow endpoints' attempts have slots of
   * their own (SLOW_ATTEMPT_MS).
   */
  concurrency: number;
  /**
   * Attempts that turned slow leave the others' slots while fewer than this many slow ones are held
   * (`slowAttemptSlots`: a bound on open connections); slow endpoints' new attempts are claimed only
   * while fewer than this many, or `concurrency` if more, are held.
   */
  slowConcurrency: number;
  /** What the open-file limit's cut of the slow slots costs (`slowSlotsCut`), said when sending starts. */
  slowSlotsCut?: string;
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
/** Bus channel naming endpoints that changed (comma-separated ids): their held attempts go back. */
export const WEBHOOK_ENDPOINTS_CHANNEL = "webhooks.endpoints-changed";

/**
 * Passes this process's `emitter.notify()` to every node (through Redis when configured), so a
 * notification committed by an api-only node wakes the worker nodes at once instead of at their next
 * poll; and its `endpointsChanged()`, so no node sends an attempt it holds with an endpoint's old
 * settings (this node's dispatcher hears it before `publish` returns).
 */
export function relayWakeups(emitter: WebhookEmitter, bus: Bus, logger: FastifyBaseLogger): void {
  emitter.onWake(() => {
    bus
      .publish(WEBHOOK_WAKE_CHANNEL, "")
      .catch((error: unknown) => logger.warn({ err: error }, "webhook wake-up not published"));
  });
  emitter.onEndpointsChanged((endpointIds) => {
    bus
      .publish(WEBHOOK_ENDPOINTS_CHANNEL, endpointIds.join(","))
      .catch((error: unknown) => logger.warn({ err: error }, "webhook endpoint change not published"));
  });
}

/** Attempts claimed in one transaction. */
const CLAIM_BATCH = 32;

/**
 * An endpoint is slow while one of its attempts has been in flight this long, and after an attempt
 * that took this long until one answers sooner. Slow endpoints' attempts count in slots of their
 * own, so receivers that hold requests open cannot take every slot from the others (QA of session
 * 53: with more than 256 such endpoints, a fast one got nothing until their attempts timed out).
 */
const SLOW_ATTEMPT_MS = 1000;

/** Endpoints remembered as slow after their last attempt; the least recently judged are forgotten. */
const SLOW_ENDPOINTS_KEPT = 10_000;

/** Changed judgments of endpoints written in one transaction at most. */
const MARKS_WRITTEN_AT_ONCE = 500;

/** How long a claim may use the list of endpoints known slow that an earlier one made. */
const KNOWN_SLOW_LISTED_MS = 250;

/** The two sets of claim slots: slow endpoints' attempts, and the others'. */
type Lane = "slow" | "others";

/** Finished attempts recorded in one transaction at most. */
const RECORD_BATCH = 64;

/** Counts one fewer for `key`, forgetting it at zero. */
function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

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
  /** Claimed attempts not yet recorded, per endpoint: being sent or waiting in `#queued`. */
  readonly #held = new Map<string, number>();
  #heldTotal = 0;
  /** When each attempt being sent to the endpoint started (`performance.now()`), oldest first; at most `perEndpoint`. */
  readonly #sending = new Map<string, number[]>();
  /** Endpoints whose last finished attempt took SLOW_ATTEMPT_MS or more (also before this process started). */
  readonly #slowEndpoints = new LRUCache<string, true>({ max: SLOW_ENDPOINTS_KEPT });
  /** Changed judgments not yet written to the store, the latest per endpoint: slow since, or null. */
  readonly #unwrittenMarks = new Map<string, string | null>();
  #writingMarks: Promise<void> | undefined;
  readonly #markLog: OutageLog;
  #knownSlowListed: { at: number; ids: string[] } | undefined;
  /** Claimed attempts waiting for one of their endpoint's sending slots, oldest first. */
  readonly #queued = new Map<string, ClaimedDelivery[]>();
  #wakePending = false;
  #stopping: Promise<void> | undefined;
  /** The last claim refused candidates because of the shared half of the slots, by set of slots. */
  #heldBackIn: Record<Lane, boolean> = { slow: false, others: false };
  /**
   * The last claim looked at every endpoint and found nothing due: claims asked for by finishing
   * attempts are not made until new work is announced (a wake-up, an alarm, the poll), each of which
   * claims by itself.
   */
  #nothingDue = false;
  #poll: NodeJS.Timeout | undefined;
  #alarm: { at: number; timer: NodeJS.Timeout } | undefined;
  /** Claims again when an attempt holding one of the others' slots turns slow (and so gives it up). */
  #slowAlarm: NodeJS.Timeout | undefined;
  #stopWake: (() => void) | undefined;
  #running = false;
  #claiming: Promise<void> | undefined;
  #ticking = false;
  #tickAgain = false;
  /** What the next claim is for: endpoints that asked (`#claimIfLow`), or anything due (`#claimAny`). */
  readonly #claimFor = new Set<string>();
  #claimAny = false;
  readonly #toRecord: {
    attempt: FinishedAttempt;
    resolve: (result: RecordResult) => void;
    reject: (error: unknown) => void;
  }[] = [];
  #recording: Promise<void> | undefined;
  readonly #claimLog: OutageLog;

  /** Developer mode's fault rules: an outcome here replaces sending the delivery. */
  injectFault: ((url: string) => DeliveryOutcome | undefined) | undefined;

  constructor(
    private readonly deliveries: DeliveryRepository,
    private readonly emitter: WebhookEmitter,
    private readonly bus: Bus,
    private readonly sender: WebhookSender,
    private readonly secrets: SigningSecrets,
    private readonly headers: SealedHeaders,
    private readonly clock: Clock,
    private readonly logger: FastifyBaseLogger,
    private readonly options: DispatcherOptions,
  ) {
    this.#claimLog = new OutageLog(logger, {
      outage: "webhook claim failed: store unavailable; logged again once it works",
      back: "webhook claim works again",
      fault: "webhook claim failed",
    });
    this.#markLog = new OutageLog(logger, {
      outage: "slow webhook endpoints not recorded: store unavailable; logged again once it works",
      back: "slow webhook endpoints recorded again",
      fault: "slow webhook endpoints not recorded",
    });
  }

  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    if (this.options.slowSlotsCut) this.logger.warn(this.options.slowSlotsCut);
    // Before anything wakes a claim.
    await this.#rememberSlowEndpoints();
    this.#stopWake = this.emitter.onWake(() => this.#wake());
    // The bus has no unsubscribe; after stop() a wake-up finds the dispatcher not running and is ignored.
    await this.bus
      .subscribe(WEBHOOK_WAKE_CHANNEL, () => this.#wake())
      .catch((error: unknown) =>
        this.logger.warn({ err: error }, "webhook wake-ups from other nodes unavailable"),
      );
    // Attempts waiting here for a sending slot were claimed with their endpoint's settings of then:
    // a secret rotated, a URL changed, an endpoint switched off or deleted since must not be used
    // (QA of 4 December: old secrets signed, and deleted endpoints were sent to, seconds later).
    await this.bus
      .subscribe(WEBHOOK_ENDPOINTS_CHANNEL, (message) => this.#giveBackWaiting(new Set(message.split(","))))
      .catch((error: unknown) =>
        this.logger.warn({ err: error }, "webhook endpoint changes from other nodes unavailable"),
      );
    // A developer-mode reset or snapshot load changed the store under this node (or it missed
    // messages): the attempts waiting in hand may be gone from it, so they are given back, not sent.
    this.bus.onReconnect(() => this.#giveBackWaiting());
    this.#poll = setInterval(() => this.#tick(), this.options.pollMs);
    this.#poll.unref();
    this.#tick();
  }

  /**
   * Stops claiming and finishes the attempts being sent; claimed attempts not started yet are given
   * back to the queue (should that fail, their claims expire and are retaken). Calling it again
   * waits for the same stop.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    this.#running = false;
    clearInterval(this.#poll);
    if (this.#alarm) clearTimeout(this.#alarm.timer);
    this.#alarm = undefined;
    clearTimeout(this.#slowAlarm);
    this.#stopWake?.();
    await this.#claiming;
    await this.#release(this.#takeWaiting());
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
    await this.#writingMarks;
    await this.sender.close();
  }

  /**
   * Starts from the endpoints judged slow before this process started (by any process): a restart
   * knew none, and endpoints that hold requests open took the others' slots again for a timeout.
   */
  async #rememberSlowEndpoints(): Promise<void> {
    try {
      const ids = await this.deliveries.slowEndpoints(SLOW_ENDPOINTS_KEPT);
      // The most recently judged last: the last forgotten.
      for (const id of ids.reverse()) this.#slowEndpoints.set(id, true);
    } catch (error) {
      this.logger.warn({ err: error }, "webhook endpoints judged slow before this start not read");
    }
  }

  /**
   * Writes a change of the endpoint's judgment to the store, for processes started later: the changes
   * made while a write runs go in the next one, the latest per endpoint. They are hints: those that
   * cannot be written are dropped (a stop waits for one failed write, not one per endpoint).
   */
  #markSlow(endpointId: string, slow: boolean): void {
    this.#unwrittenMarks.set(endpointId, slow ? this.clock.now().toISOString() : null);
    this.#writingMarks ??= this.#writeMarks();
  }

  async #writeMarks(): Promise<void> {
    while (this.#unwrittenMarks.size > 0) {
      const marks = new Map([...this.#unwrittenMarks].slice(0, MARKS_WRITTEN_AT_ONCE));
      for (const endpointId of marks.keys()) this.#unwrittenMarks.delete(endpointId);
      try {
        await this.deliveries.markSlow(marks);
        this.#markLog.succeeded();
      } catch (error) {
        this.#markLog.failed(error);
        this.#unwrittenMarks.clear();
      }
    }
    this.#writingMarks = undefined;
  }

  /** Takes the claimed attempts that wait for a sending slot (of `endpointIds` only, when given) out of this process's hand. */
  #takeWaiting(endpointIds?: ReadonlySet<string>): ClaimedDelivery[] {
    const waiting: ClaimedDelivery[] = [];
    for (const [endpointId, queue] of this.#queued) {
      if (endpointIds && !endpointIds.has(endpointId)) continue;
      waiting.push(...queue);
      this.#queued.delete(endpointId);
    }
    return waiting;
  }

  /** Gives claimed attempts back to the queue (should that fail, their claims expire and are retaken). */
  async #release(deliveries: ClaimedDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    await this.deliveries
      .release(deliveries, this.clock.now().toISOString())
      .catch((error: unknown) => this.logger.warn({ err: error }, "claimed webhook attempts not released"));
  }

  /** The waiting attempts (of `endpointIds`, when given) go back to the queue, and what is due there is claimed again. */
  #giveBackWaiting(endpointIds?: ReadonlySet<string>): void {
    if (!this.#running) return;
    const waiting = this.#takeWaiting(endpointIds);
    if (endpointIds && waiting.length === 0) return;
    for (const delivery of waiting) {
      decrement(this.#held, delivery.endpoint_id);
      this.#heldTotal--;
    }
    void this.#release(waiting).then(() => this.#tick());
  }

  /**
   * A notification was committed (here or on another node). Wake-ups of one turn of the event loop
   * share one claim, made after that turn's other work: a burst of notifications costs one claim,
   * not one each, and a lone notification waits for nothing.
   */
  #wake(): void {
    if (!this.#running || this.#wakePending) return;
    this.#wakePending = true;
    setImmediate(() => {
      this.#wakePending = false;
      this.#tick();
    });
  }

  /** Claims for `endpointId`, or for anything due (a wake-up, the poll, an alarm). */
  #tick(endpointId?: string): void {
    if (!this.#running) return;
    if (endpointId === undefined) {
      this.#claimAny = true;
      this.#nothingDue = false;
    } else {
      this.#claimFor.add(endpointId);
    }
    if (this.#ticking) {
      this.#tickAgain = true;
      return;
    }
    this.#runClaim();
  }

  /** One claim at a time; reasons to claim that arrive meanwhile are served by one more after it. */
  #runClaim(): void {
    this.#ticking = true;
    this.#claiming = this.#claim()
      .then(
        () => this.#claimLog.succeeded(),
        (error: unknown) => this.#claimLog.failed(error),
      )
      .finally(() => {
        this.#ticking = false;
        this.#claiming = undefined;
        if (this.#tickAgain && this.#running) {
          this.#tickAgain = false;
          this.#runClaim();
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
    const { concurrency } = this.options;
    // Two sets of slots: the others' `concurrency`, and slow endpoints' attempts, which leave the
    // others' slots up to `slowConcurrency`. Slow endpoints' new attempts are claimed up to the larger
    // of the two: where they were claimed up to `concurrency` alone, endpoints known slow that had
    // recovered waited several timeouts behind hundreds still hanging (QA of session 57, after a restart).
    const slowSlots = Math.max(concurrency, this.options.slowConcurrency);
    const slowHeld = new Map<string, number>();
    let slowHeldTotal = 0;
    for (const [endpointId, held] of this.#held) {
      if (!this.#isSlow(endpointId)) continue;
      slowHeld.set(endpointId, held);
      slowHeldTotal += held;
    }
    const othersHeld = this.#heldTotal - Math.min(slowHeldTotal, this.options.slowConcurrency);
    // Claims go in small batches: the candidate scan stays short, and a full batch claims again at once.
    const free = Math.min(concurrency - othersHeld, CLAIM_BATCH);
    if (free <= 0) {
      this.#wakeWhenSlow(slowHeld);
      return;
    }
    const now = this.clock.now();
    const taken = new Map<string, number>();
    const takenIn: Record<Lane, number> = { slow: 0, others: 0 };
    const laneOf = (endpointId: string): Lane =>
      slowHeld.has(endpointId) || this.#slowEndpoints.has(endpointId) ? "slow" : "others";
    // An endpoint keeps its next round of attempts claimed (up to twice `perEndpoint`), so one claim
    // serves many attempts. Fairness: in each set, half the slots are kept for endpoints with nothing
    // in hand, so endpoints holding their attempts open cannot take every slot from the others.
    const holdLimit = 2 * this.options.perEndpoint;
    const mayTakeAnother = (endpointId: string, heldByEndpoint: number) => {
      const slow = laneOf(endpointId) === "slow";
      const inUse = slow ? slowHeldTotal + takenIn.slow : othersHeld + takenIn.others;
      const slots = slow ? slowSlots : concurrency;
      if (slow && inUse >= slots) return false;
      return heldByEndpoint === 0 || (heldByEndpoint < holdLimit && inUse < slots / 2);
    };
    // Passed over by the claim: endpoints that may take nothing now, and those with attempts still
    // waiting in hand (they claim again when that queue runs dry).
    const skipped = [...this.#held].filter(([id, held]) => this.#queued.has(id) || !mayTakeAnother(id, held));
    // Endpoints held back only by the shared half: an attempt of their set finishing may let them go on.
    const heldBack: Record<Lane, boolean> = { slow: false, others: false };
    for (const [id, held] of skipped) {
      if (!this.#queued.has(id) && held < holdLimit) heldBack[laneOf(id)] = true;
    }
    // Endpoints that asked for this claim while another was running may have been served by that one.
    const skippedIds = new Set(skipped.map(([id]) => id));
    const asking = [...this.#claimFor].filter((id) => !skippedIds.has(id));
    // After a claim that found nothing due and held nothing back for want of a slot, a slot freed by a
    // finishing attempt (also one that finished while that claim ran) has nothing to take.
    const anything = this.#claimAny || this.#heldBackIn.slow || this.#heldBackIn.others;
    const wanted = anything || (!this.#nothingDue && asking.length > 0);
    this.#claimAny = false;
    this.#claimFor.clear();
    if (!wanted) return;
    // With the slow endpoints' set full, every endpoint known slow is refused: passed over before the
    // reads, their waiting attempts cannot hide the others' (QA of session 54: refused one by one,
    // they kept a fast endpoint waiting for whole timeouts).
    // They are held back as refused ones are: a slow attempt finishing claims for them.
    const passOver = slowHeldTotal >= slowSlots ? [...slowHeld.keys(), ...this.#knownSlow()] : [];
    if (passOver.length > 0) heldBack.slow = true;
    const claimed = await this.deliveries.claim(
      now.toISOString(),
      laterBy(now, this.options.leaseMs).toISOString(),
      free,
      skipped.map(([id]) => id),
      (endpointId) => {
        const held = (this.#held.get(endpointId) ?? 0) + (taken.get(endpointId) ?? 0);
        if (!mayTakeAnother(endpointId, held)) {
          if (held < holdLimit) heldBack[laneOf(endpointId)] = true;
          return false;
        }
        taken.set(endpointId, (taken.get(endpointId) ?? 0) + 1);
        takenIn[laneOf(endpointId)]++;
        return true;
      },
      { endpoints: asking, anything, passOver },
    );
    this.#heldBackIn = heldBack;
    // A wake-up that arrived meanwhile has asked for another claim, which runs next whatever this says.
    this.#nothingDue = claimed.length === 0 && skipped.length === 0 && !heldBack.slow && !heldBack.others;
    for (const delivery of claimed) {
      this.#held.set(delivery.endpoint_id, (this.#held.get(delivery.endpoint_id) ?? 0) + 1);
      this.#heldTotal++;
      const queue = this.#queued.get(delivery.endpoint_id);
      if (queue) queue.push(delivery);
      else this.#queued.set(delivery.endpoint_id, [delivery]);
    }
    for (const endpointId of new Set(claimed.map((delivery) => delivery.endpoint_id))) {
      this.#sendNext(endpointId);
    }
    // A full batch, or a claim for anything due that found some: more may wait behind the oldest
    // attempts, which only such a claim looks for (QA of session 53: a burst to 3,000 endpoints behind
    // one endpoint's backlog was otherwise found at the poll's pace).
    if (claimed.length === free || (anything && claimed.length > 0)) this.#tick();
    // With endpoints skipped, the earliest waiting attempt is usually their backlog, due already: asking
    // is left to a later claim that skips none (their attempts finishing lead to one), or to the poll.
    if (claimed.length === 0 && skipped.length === 0) {
      // Due work left unclaimed is held back by a concurrency limit: a finishing attempt wakes us.
      const due = await this.deliveries.nextDue();
      if (due && Date.parse(due) > now.getTime()) this.#wakeAt(Date.parse(due));
    }
  }

  /** Starts the endpoint's waiting attempts while it has free sending slots. */
  #sendNext(endpointId: string): void {
    const queue = this.#queued.get(endpointId);
    while (this.#running && queue && queue.length > 0) {
      const sending = this.#sending.get(endpointId) ?? [];
      if (sending.length >= this.options.perEndpoint) return;
      const delivery = queue.shift() as ClaimedDelivery;
      if (queue.length === 0) this.#queued.delete(endpointId);
      const startedAt = performance.now();
      sending.push(startedAt);
      this.#sending.set(endpointId, sending);
      const run = this.#send(delivery)
        .finally(() => this.#answered(endpointId, startedAt))
        .then((sent) => sent && this.#recordOutcome(delivery, sent.at, sent.outcome))
        .catch((error: unknown) =>
          this.logger.error({ err: error, deliveryId: delivery.id }, "webhook delivery failed to record"),
        )
        .finally(() => this.#finished(run, endpointId));
      this.#inFlight.add(run);
    }
  }

  /**
   * The receiver has answered (or the attempt was dropped): its sending slot goes to the endpoint's
   * next attempt while this one's outcome is recorded, so recording never holds a request slot.
   */
  #answered(endpointId: string, startedAt: number): void {
    const sending = this.#sending.get(endpointId) ?? [];
    sending.splice(sending.indexOf(startedAt), 1);
    if (sending.length === 0) this.#sending.delete(endpointId);
    const slow = performance.now() - startedAt >= SLOW_ATTEMPT_MS;
    const wasSlow = this.#slowEndpoints.has(endpointId);
    if (slow) this.#slowEndpoints.set(endpointId, true);
    else this.#slowEndpoints.delete(endpointId);
    if (slow !== wasSlow) this.#markSlow(endpointId, slow);
    this.#sendNext(endpointId);
    this.#claimIfLow(endpointId);
  }

  /**
   * Every slot of the others is held: claims again when the oldest of their attempts in flight turns
   * slow, rather than at the poll (an endpoint that holds requests open gives up its slots then).
   */
  #wakeWhenSlow(slowHeld: ReadonlyMap<string, number>): void {
    if (this.#slowAlarm !== undefined) return;
    let oldest = Number.POSITIVE_INFINITY;
    for (const [endpointId, startedAt] of this.#sending) {
      if (!slowHeld.has(endpointId)) oldest = Math.min(oldest, startedAt[0] ?? oldest);
    }
    if (oldest === Number.POSITIVE_INFINITY) return;
    const delay = Math.max(0, oldest + SLOW_ATTEMPT_MS - performance.now());
    this.#slowAlarm = setTimeout(() => {
      this.#slowAlarm = undefined;
      this.#tick();
    }, delay + 5);
    this.#slowAlarm.unref();
  }

  /**
   * The endpoints known slow by their last attempt, listed at most KNOWN_SLOW_LISTED_MS ago: listing
   * them all, up to SLOW_ENDPOINTS_KEPT, for every claim was most of a claim's own time behind 1,000
   * hanging endpoints (QA of session 54).
   */
  #knownSlow(): readonly string[] {
    const now = performance.now();
    if (this.#knownSlowListed === undefined || now - this.#knownSlowListed.at >= KNOWN_SLOW_LISTED_MS) {
      this.#knownSlowListed = { at: now, ids: [...this.#slowEndpoints.keys()] };
    }
    return this.#knownSlowListed.ids;
  }

  /** Whether the endpoint's last attempt, or one still in flight, took SLOW_ATTEMPT_MS or more. */
  #isSlow(endpointId: string): boolean {
    if (this.#slowEndpoints.has(endpointId)) return true;
    const oldest = this.#sending.get(endpointId)?.[0];
    return oldest !== undefined && performance.now() - oldest >= SLOW_ATTEMPT_MS;
  }

  /** The attempt's outcome is recorded: its claim is no longer held. */
  #finished(run: Promise<void>, endpointId: string): void {
    this.#inFlight.delete(run);
    decrement(this.#held, endpointId);
    this.#heldTotal--;
    this.#claimIfLow(endpointId);
  }

  /**
   * Claims again when this endpoint has nothing left in hand to send and room for a whole round (one
   * claim per round, not one per finished attempt), or when others were held back because the shared
   * half of this endpoint's set of slots was full; otherwise new work arrives with its own wake-up.
   */
  #claimIfLow(endpointId: string): void {
    const roomForRound = (this.#held.get(endpointId) ?? 0) <= this.options.perEndpoint;
    if (this.#heldBackIn[this.#isSlow(endpointId) ? "slow" : "others"]) this.#tick();
    else if (roomForRound && !this.#queued.has(endpointId)) this.#tick(endpointId);
  }

  /** Makes the attempt; undefined when it is not made (its endpoint was switched off). */
  async #send(delivery: ClaimedDelivery): Promise<{ at: Date; outcome: DeliveryOutcome } | undefined> {
    // A switched-off endpoint gets nothing scheduled; tests and retries asked for by hand still go.
    if (!delivery.is_active && !delivery.manual && delivery.event !== "test") {
      await this.deliveries.drop(delivery);
      return undefined;
    }
    const at = this.clock.now();
    const fault = this.injectFault?.(delivery.url);
    if (fault) return { at, outcome: fault };
    let secret: string;
    let previousSecret: string | undefined;
    let headers: EndpointHeaders | null;
    try {
      secret = this.secrets.open(delivery.endpoint_id, delivery.secret);
      previousSecret = stillSigning(delivery, at)
        ? this.secrets.openPrevious(delivery.endpoint_id, delivery.previous_secret)
        : undefined;
      headers = this.headers.open(delivery.endpoint_id, delivery.headers);
    } catch (error) {
      return { at, outcome: this.#unopenedSecret(delivery, error) };
    }
    const outcome = await this.sender.send(
      {
        url: delivery.url,
        messageId: delivery.message_id,
        body: delivery.body,
        secret,
        previousSecret,
        headers,
      },
      at,
    );
    return { at, outcome };
  }

  /**
   * The endpoint's secret does not open under this node's secret key (another key than the one it was
   * sealed with): the attempt is not sent, since a wrong signature would fail at the receiver with no
   * word of why. It is recorded as failed, naming the cause, and retried on the endpoint's schedule,
   * so deliveries resume once the key is put right; the operator's log line says how.
   */
  #unopenedSecret(delivery: ClaimedDelivery, error: unknown): DeliveryOutcome {
    this.logger.error(
      { err: error, endpointId: delivery.endpoint_id, deliveryId: delivery.id },
      "webhook attempt not sent: its endpoint's signing secret could not be decrypted",
    );
    return {
      success: false,
      status: 0,
      body: "",
      error: "Not sent: the endpoint's signing secret could not be decrypted with the server's secret key",
      durationMs: 0,
      retryAfter: undefined,
    };
  }

  async #recordOutcome(delivery: ClaimedDelivery, at: Date, outcome: DeliveryOutcome): Promise<void> {
    this.options.onAttempt?.(outcome.status, outcome.success, outcome.durationMs);
    const policy = readJson<RetryPolicy>(delivery.retry_policy);
    const result = await this.#record({
      delivery,
      outcome: {
        success: outcome.success,
        response_status: outcome.status,
        response_body: outcome.body,
        error: outcome.error,
        duration_ms: outcome.durationMs,
        attempted_at: at.toISOString(),
      },
      plan: this.#plan(outcome, policy, delivery.manual),
    });
    if (result.error !== undefined) throw result.error;
    if (result.nextRetryAt) this.#wakeAt(Date.parse(result.nextRetryAt));
  }

  /**
   * Queues a finished attempt for the next batch. One batch is written at a time; attempts that
   * finish meanwhile wait for the following one, so under load a commit covers many attempts while
   * a lone attempt is written at once.
   */
  #record(attempt: FinishedAttempt): Promise<RecordResult> {
    return new Promise((resolve, reject) => {
      this.#toRecord.push({ attempt, resolve, reject });
      // The batch starts after the I/O callbacks of this loop turn, so answers that arrived
      // together are recorded together.
      this.#recording ??= new Promise((started) => setImmediate(started)).then(() => this.#recordBatches());
    });
  }

  async #recordBatches(): Promise<void> {
    while (this.#toRecord.length > 0) {
      const batch = this.#toRecord.splice(0, RECORD_BATCH);
      try {
        const results = await this.deliveries.recordMany(batch.map((entry) => entry.attempt));
        for (const [index, entry] of batch.entries()) entry.resolve(results[index] as RecordResult);
      } catch (error) {
        for (const entry of batch) entry.reject(error);
      }
    }
    this.#recording = undefined;
  }

  /** What follows an attempt; a function of the attempts made when that count matters. */
  #plan(outcome: DeliveryOutcome, policy: RetryPolicy | null, manual: boolean): FinishedAttempt["plan"] {
    if (outcome.success) return { nextRetryAt: undefined, deactivateEndpoint: false };
    if (outcome.status === 410) return { nextRetryAt: undefined, deactivateEndpoint: true };
    // A manual attempt never schedules another one.
    if (manual) return { nextRetryAt: undefined, deactivateEndpoint: false };
    return (made: number) => {
      let delay = nextRetryDelayMs(policy, made, this.options.random);
      if (delay === undefined) return { nextRetryAt: undefined, deactivateEndpoint: false };
      const now = this.clock.now();
      if (outcome.status === 429 || outcome.status === 503) {
        const asked = parseRetryAfter(outcome.retryAfter, now);
        // Only ever lengthens the wait: the cap must not cut a scheduled delay longer than a day.
        if (asked !== undefined) delay = Math.max(delay, Math.min(asked, MAX_RETRY_AFTER_MS));
      }
      return { nextRetryAt: laterBy(now, delay).toISOString(), deactivateEndpoint: false };
    };
  }
}

/** Whether the endpoint's previous secret (kept by a rotation with an overlap) still signs at `at`. */
const stillSigning = (
  delivery: ClaimedDelivery,
  at: Date,
): delivery is ClaimedDelivery & { previous_secret: string } =>
  delivery.previous_secret !== null &&
  delivery.previous_secret_expires_at !== null &&
  Date.parse(delivery.previous_secret_expires_at) > at.getTime();
