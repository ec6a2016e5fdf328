import { EventEmitter } from "node:events";
import { type Clock, nowIso } from "../clock.ts";
import { unixSeconds } from "../http/time.ts";
import { timeOrderedUuid } from "../ids.ts";
import type { Executor } from "../store/transactions.ts";
import type { MessageRow, WebhookRepository } from "./repository.ts";
import type { VideoEventData } from "./schemas.ts";

export const VIDEO_EVENTS = [
  "created",
  "uploading",
  "processing",
  "transcoding",
  "packaging",
  "ready",
  "failed",
  "deleted",
] as const;
export type VideoEvent = (typeof VIDEO_EVENTS)[number];

export type Notification =
  | { event: VideoEvent; organizationId: string; libraryId: string; videoId: string; data: VideoEventData }
  | { event: "test"; organizationId: string; libraryId: string; endpointId: string };

/**
 * Writes a notification and the first delivery attempt for each endpoint that wants it, inside the
 * caller's transaction (transactional outbox): the notification exists exactly when the change does.
 */
export class WebhookEmitter {
  readonly #wake = new EventEmitter();

  constructor(
    private readonly repository: WebhookRepository,
    private readonly clock: Clock,
  ) {}

  /** Returns how many deliveries were queued. Call `notify()` once the transaction has committed. */
  async emit(executor: Executor, notification: Notification): Promise<number> {
    const now = nowIso(this.clock);
    const message: MessageRow = {
      id: `msg_${timeOrderedUuid().replace(/-/g, "")}`,
      organization_id: notification.organizationId,
      library_id: notification.libraryId,
      video_id: notification.event === "test" ? null : notification.videoId,
      event: notification.event,
      body: JSON.stringify({
        event: notification.event,
        event_type: notification.event === "test" ? "test" : "video",
        notification_time: unixSeconds(now),
        payload: notification.event === "test" ? {} : notification.data,
      }),
      created_at: now,
    };
    if (notification.event !== "test") return this.repository.queueForSubscribers(executor, message);
    await this.repository.queueMessage(executor, message, [notification.endpointId]);
    return 1;
  }

  /** Whether a notification of `event` in the library would be sent anywhere. */
  wanted(executor: Executor, libraryId: string, event: VideoEvent): Promise<boolean> {
    return this.repository.hasSubscribers(executor, libraryId, event);
  }

  /** Wakes this process's dispatcher for fresh deliveries. */
  notify(): void {
    this.#wake.emit("wake");
  }

  onWake(listener: () => void): () => void {
    this.#wake.on("wake", listener);
    return () => this.#wake.off("wake", listener);
  }

  /**
   * Endpoints were changed or deleted (their change has committed): attempts a dispatcher holds for
   * them, claimed with the settings of before, go back to be claimed again (`relayWakeups`).
   */
  endpointsChanged(endpointIds: readonly string[]): void {
    if (endpointIds.length > 0) this.#wake.emit("endpoints", endpointIds);
  }

  onEndpointsChanged(listener: (endpointIds: readonly string[]) => void): void {
    this.#wake.on("endpoints", listener);
  }
}
