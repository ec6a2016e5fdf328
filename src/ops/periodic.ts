import type { BackgroundWorker } from "../services.ts";

/**
 * A background worker that runs its pass as it starts and then every `intervalMs`, one pass at a
 * time (a pass still running when the next is due is not doubled); stopping waits for the running one.
 */
export abstract class PeriodicWorker implements BackgroundWorker {
  abstract readonly name: string;
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<void> | undefined;

  constructor(private readonly intervalMs: number) {}

  /** One pass; it logs its own failures, which never stop the next pass. */
  protected abstract pass(): Promise<void>;

  async start(): Promise<void> {
    this.#timer = setInterval(() => this.#passInBackground(), this.intervalMs);
    this.#timer.unref();
    this.#passInBackground();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#pass;
  }

  #passInBackground(): void {
    this.#pass ??= this.pass().finally(() => {
      this.#pass = undefined;
    });
  }
}
