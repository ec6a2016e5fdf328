/**
 * Webhook delivery benchmark: sustained deliveries/s to a local receiver and median
 * event-to-receipt latency, against the same receiver driven directly by undici in the same run.
 *
 *   npm run bench:webhooks            (SQLite)
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:webhooks
 *                                     (PostgreSQL: Cumulo gets a scratch database of its own on that server)
 *   BENCH_DELIVERIES=5000 npm run bench:webhooks
 *   BENCH_WARMUP=0 ...                (no unmeasured round first; the default is BENCH_DELIVERIES)
 *   BENCH_STATEMENTS=1 ...            (PostgreSQL: the statements of the sustained run per delivery)
 *   BENCH_SENDER=1 ...                (also the sender alone: WebhookSender.send, with a secret and
 *                                      the notification's body, against the direct posts, alternated)
 *   BENCH_PHASES=1 ...                (also the two halves apart: notifications committed with no
 *                                      dispatcher running, then that backlog drained by a dispatcher)
 *
 * Beside wall-clock throughput it prints the process's CPU time per item (the bench, receiver and
 * Cumulo share one process), which moves less than throughput when other work shares the machine; on
 * PostgreSQL also the CPU its backends serving Cumulo's database used (when the server runs here).
 *
 * Each side first runs an unmeasured round of BENCH_WARMUP items, so that both are measured with
 * their code compiled by the JIT: cold, the baseline ran at a third of its warm speed, and the ratio
 * came out nearly twice what the warm sides give (docs/performance.md, session 12).
 *
 * Both sides send the same request: the notification's JSON body as the emitter builds it, with the
 * same headers (the direct side sends a fixed signature of the same size), over keep-alive connections
 * of one undici Agent, 8 at a time, to the same receiver, which finds the video id in the body.
 *
 * Then fairness: BENCH_ENDPOINTS (1000) endpoints on one library, 80% fast, 10% slow (answer after
 * 1 s) and 10% failing (500), BENCH_EVENTS (3) notifications to all of them; it prints how soon every
 * fast endpoint had all its notifications, beside the slow receivers' 1 s.
 *
 * Then a slow endpoint's backlog (BENCH_BACKLOG, 20000; 0 skips it): a fast endpoint's deliveries per
 * second while BENCH_BACKLOG_ENDPOINTS (1) other endpoints of its library, answering after 1 s, have
 * that many attempts waiting and due between them, against the same fast deliveries on a server
 * without that backlog.
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { sql } from "kysely";
import pg from "pg";
import { Agent, request } from "undici";
import { WebhookSender } from "../src/webhooks/sender.ts";
import { startTestApp, type TestApp } from "../test/support/app.ts";
import {
  createLibrary,
  emitVideoEvent,
  organizationOf,
  videoData,
  webhooksPath,
} from "../test/webhooks/helpers.ts";
import { cpuByProcess, median } from "./figures.ts";

if (process.env.BENCH_DATABASE_URL) {
  process.env.TEST_DATABASE_URL = process.env.BENCH_DATABASE_URL;
  process.env.CUMULO_TEST_STORE = "postgres";
}

const TOTAL = Number(process.env.BENCH_DELIVERIES ?? 2000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? TOTAL);
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 1000);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 3);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 20000);
const BACKLOG_ENDPOINTS = Number(process.env.BENCH_BACKLOG_ENDPOINTS ?? 1);
const SLOW_MS = 1000;
const LATENCY_SAMPLES = 200;
// The dispatcher sends at most 8 attempts at once to one endpoint; the baseline gets the same.
const CONCURRENCY = 8;

/** CPU time (user + system) this process spent since `before`, in µs: steadier than wall time on a shared machine. */
const cpuMicros = (before: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(before);
  return used.user + used.system;
};
/**
 * PostgreSQL's share of the work: the CPU its backends serving Cumulo's database used meanwhile, when
 * the server runs on this machine (its WAL writer and checkpointer are not counted).
 */
async function postgresBackendsCpu(db: TestApp["cumulo"]["store"]["db"]) {
  const backends = async () =>
    (
      await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database()`.execute(
        db,
      )
    ).rows.map((row) => row.pid);
  const before = cpuByProcess(await backends());
  if (before.size === 0) return () => Promise.resolve(undefined);
  return async () => {
    let used = 0;
    for (const [pid, micros] of cpuByProcess(await backends())) used += micros - (before.get(pid) ?? 0);
    return used;
  };
}
/** Statements sent to PostgreSQL while `countingStatements`, by their first words (BENCH_STATEMENTS=1). */
const statements = new Map<string, number>();
let countingStatements = false;
if (process.env.BENCH_STATEMENTS === "1") {
  const client = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const query = client.query;
  client.query = function (this: unknown, ...args: unknown[]) {
    if (countingStatements) {
      const text = typeof args[0] === "string" ? args[0] : ((args[0] as { text?: string }).text ?? "");
      const key = text.replace(/\s+/g, " ").slice(0, 60);
      statements.set(key, (statements.get(key) ?? 0) + 1);
    }
    return query.apply(this, args);
  };
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Receipt time of every request, by the video id in its body. */
const receipts = new Map<string, number>();
let onReceipt: (() => void) | undefined;
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    const at = performance.timeOrigin + performance.now();
    if (req.url?.startsWith("/mixed/")) return mixedReceipt(req.url, Buffer.concat(chunks), at, res);
    receipts.set(JSON.parse(Buffer.concat(chunks).toString()).payload.video_id, at);
    res.end("ok");
    onReceipt?.();
  });
});

/** Mixed endpoints: `/mixed/<kind>/<n>`; fast receipts are timed per (endpoint, video). */
const mixed = { fast: new Map<string, number>(), slow: 0, failing: 0 };
function mixedReceipt(url: string, body: Buffer, at: number, res: import("node:http").ServerResponse) {
  const [, , kind] = url.split("/");
  if (kind === "slow") {
    mixed.slow++;
    setTimeout(() => res.end("ok"), SLOW_MS);
  } else if (kind === "failing") {
    mixed.failing++;
    res.statusCode = 500;
    res.end("no");
  } else {
    mixed.fast.set(`${url} ${JSON.parse(body.toString()).payload.video_id}`, at);
    res.end("ok");
  }
}
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
const now = () => performance.timeOrigin + performance.now();

/** Waits until every id has been received; each id is checked once after it arrived (not the whole list per receipt). */
async function waitForReceipts(ids: string[]): Promise<void> {
  let next = 0;
  while (next < ids.length) {
    if (receipts.has(ids[next] as string)) {
      next++;
      continue;
    }
    await new Promise<void>((resolve) => {
      onReceipt = resolve;
      setTimeout(resolve, 50);
    });
  }
  onReceipt = undefined;
}

// Baseline: undici posting the same requests to the same receiver.
const organizationId = randomUUID();
const libraryId = randomUUID();
/** The body the emitter builds for a `created` notification of this video. */
const notificationBody = (videoId: string) =>
  JSON.stringify({
    event: "created",
    event_type: "video",
    notification_time: Math.floor(Date.now() / 1000),
    payload: videoData(organizationId, libraryId, videoId, "created"),
  });
const agent = new Agent();
const direct = async (videoId: string) => {
  const response = await request(receiverUrl, {
    method: "POST",
    dispatcher: agent,
    headers: {
      "content-type": "application/json",
      "user-agent": "Cumulo-Webhooks/bench",
      "webhook-id": `msg_${randomUUID().replace(/-/g, "")}`,
      "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
      "webhook-signature": `v1,${"A".repeat(43)}=`,
    },
    body: notificationBody(videoId),
  });
  await response.body.text();
};

/** `count` direct posts, CONCURRENCY at a time. */
async function postAll(count: number): Promise<void> {
  const ids = Array.from({ length: count }, () => randomUUID());
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) await direct(ids[next++] as string);
    }),
  );
}

async function baseline() {
  await postAll(WARMUP);
  const started = now();
  const cpuBefore = process.cpuUsage();
  await postAll(TOTAL);
  const throughput = TOTAL / ((now() - started) / 1000);
  const cpuPerItem = cpuMicros(cpuBefore) / TOTAL;
  const latencies: number[] = [];
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const id = randomUUID();
    const sent = now();
    await direct(id);
    latencies.push((receipts.get(id) ?? Number.NaN) - sent);
  }
  return { throughput, latency: median(latencies), cpuPerItem };
}

/**
 * The sender alone, without store or dispatcher: `WebhookSender.send` (URL check, signature, timeout,
 * capped read of the answer) CONCURRENCY at a time, against the direct posts, in alternated rounds;
 * CPU µs per request of each (median of the rounds).
 */
async function senderAlone(rounds = 3) {
  const sender = new WebhookSender({
    allowPrivate: true,
    timeoutMs: 15_000,
    maxResponseBytes: 65_536,
    userAgent: "Cumulo-Webhooks/bench",
  });
  const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
  const send = async (videoId: string) => {
    const outcome = await sender.send(
      {
        url: receiverUrl,
        messageId: `msg_${randomUUID().replace(/-/g, "")}`,
        body: notificationBody(videoId),
        secret,
        headers: null,
      },
      new Date(),
    );
    if (!outcome.success) throw new Error(`sender: ${outcome.error ?? outcome.status}`);
  };
  const cpuPerRequest = async (post: (videoId: string) => Promise<void>) => {
    const ids = Array.from({ length: TOTAL }, () => randomUUID());
    let next = 0;
    const cpuBefore = process.cpuUsage();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < ids.length) await post(ids[next++] as string);
      }),
    );
    return cpuMicros(cpuBefore) / TOTAL;
  };
  await cpuPerRequest(send);
  const senders: number[] = [];
  const directs: number[] = [];
  for (let round = 0; round < rounds; round++) {
    directs.push(await cpuPerRequest(direct));
    senders.push(await cpuPerRequest(send));
  }
  await sender.close();
  return { sender: median(senders), direct: median(directs), rounds };
}

/** A library with one endpoint at the receiver subscribed to `created`; returns how to notify it. */
async function benchNotifier(t: TestApp): Promise<() => Promise<string>> {
  const organizationId = await organizationOf(t);
  const libraryId = await createLibrary(t.cumulo.services, organizationId);
  const created = await t.request("POST", webhooksPath(libraryId), {
    json: { name: "bench", url: receiverUrl, events: ["created"] },
  });
  if (created.status !== 201) throw new Error(`endpoint not created: ${created.text}`);
  return () =>
    emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
      organizationId,
      libraryId,
      event: "created",
    });
}

/** `count` notifications, each committed in a transaction of its own, by CONCURRENCY producers at once. */
async function produceAll(emit: () => Promise<string>, count = TOTAL): Promise<string[]> {
  const ids: string[] = [];
  let emitted = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (emitted < count) {
        emitted++;
        ids.push(await emit());
      }
    }),
  );
  return ids;
}

async function cumulo() {
  const t = await startTestApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true", CUMULO_LOG_LEVEL: "silent" });
  try {
    // As in `phases`: a start's route schemas, compiled in idle turns, are no delivery's work (a V8
    // profile of the sustained part found 2.6% of its CPU there, after the warm-up; session 53).
    await t.cumulo.app?.compileSchemas();
    const emit = await benchNotifier(t);
    await waitForReceipts(await produceAll(emit, WARMUP));

    // Sustained: every notification committed as fast as the store takes them, each in its own
    // transaction like a video state change, by as many producers at once as the direct side has
    // requests in flight (API requests run side by side too); throughput from the first commit to
    // the last receipt.
    const started = now();
    const cpuBefore = process.cpuUsage();
    const postgresUsed =
      t.store.kind === "postgres" ? await postgresBackendsCpu(t.cumulo.store.db) : undefined;
    countingStatements = true;
    const ids = await produceAll(emit);
    const emittedIn = (now() - started) / 1000;
    await waitForReceipts(ids);
    const throughput = TOTAL / ((now() - started) / 1000);
    const cpuPerItem = cpuMicros(cpuBefore) / TOTAL;
    countingStatements = false;
    const postgresMicros = await postgresUsed?.();
    const postgresCpuPerItem = postgresMicros === undefined ? undefined : postgresMicros / TOTAL;

    // Latency on an otherwise idle server: one notification at a time.
    const latencies: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const sent = now();
      const id = await emit();
      await waitForReceipts([id]);
      latencies.push((receipts.get(id) ?? Number.NaN) - sent);
      await sleep(2);
    }
    return {
      throughput,
      latency: median(latencies),
      cpuPerItem,
      postgresCpuPerItem,
      emittedPerSecond: TOTAL / emittedIn,
      store: t.store.kind,
    };
  } finally {
    await t.close();
  }
}

/**
 * The two halves of the sustained run apart: the same producers commit TOTAL notifications while no
 * dispatcher runs, then a dispatcher started on the same store drains that backlog.
 */
async function phases() {
  const producer = await startTestApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true", CUMULO_LOG_LEVEL: "silent" });
  try {
    await producer.cumulo.services.webhookDispatcher.stop();
    // Route schemas are compiled after a start, in idle turns: neither the producer's nor a second API
    // listener's may be counted in either half (about an eighth of the drain's CPU, docs/performance.md,
    // session 49), as the sustained run, measured after a warm-up, never pays them.
    await producer.cumulo.app?.compileSchemas();
    const emit = await benchNotifier(producer);
    const started = now();
    const cpuBefore = process.cpuUsage();
    const ids = await produceAll(emit);
    const emits = { perSecond: TOTAL / ((now() - started) / 1000), cpuPerItem: cpuMicros(cpuBefore) / TOTAL };
    // A worker node: no API listener of its own compiles schemas during the drain.
    const dispatcher = await startTestApp(
      { CUMULO_WEBHOOK_ALLOW_PRIVATE: "true", CUMULO_LOG_LEVEL: "silent", CUMULO_ROLES: "worker" },
      { store: producer.store },
    );
    try {
      // Timed from a first receipt, so the dispatcher's start is left out.
      if (!ids.some((id) => receipts.has(id))) {
        await new Promise<void>((resolve) => {
          onReceipt = resolve;
        });
      }
      const drainStarted = now();
      const drainCpu = process.cpuUsage();
      const backlog = ids.filter((id) => !receipts.has(id)).length;
      await waitForReceipts(ids);
      const drain = {
        perSecond: backlog / ((now() - drainStarted) / 1000),
        cpuPerItem: cpuMicros(drainCpu) / backlog,
      };
      return { emits, drain };
    } finally {
      await dispatcher.close();
    }
  } finally {
    await producer.close();
  }
}

/** Fairness: fast endpoints served while slow and failing ones take their share of the dispatcher. */
async function fairness() {
  const t = await startTestApp({
    CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
    CUMULO_LOG_LEVEL: "silent",
    CUMULO_RATE_LIMIT: "1000000000/1h",
    // All of them on one library, past the default limit of 100.
    CUMULO_WEBHOOK_ENDPOINTS_MAX: String(ENDPOINTS),
  });
  try {
    const organizationId = await organizationOf(t);
    const libraryId = await createLibrary(t.cumulo.services, organizationId);
    let fastEndpoints = 0;
    for (let i = 0; i < ENDPOINTS; i++) {
      const kind = i % 10 === 0 ? "slow" : i % 10 === 1 ? "failing" : "fast";
      if (kind === "fast") fastEndpoints++;
      const created = await t.request("POST", webhooksPath(libraryId), {
        json: {
          name: `bench ${i}`,
          url: `${receiverUrl.replace("/hook", "")}/mixed/${kind}/${i}`,
          events: ["created"],
        },
      });
      if (created.status !== 201) throw new Error(`endpoint not created: ${created.text}`);
    }
    const started = now();
    for (let i = 0; i < EVENTS; i++) {
      await emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
        organizationId,
        libraryId,
        event: "created",
      });
    }
    const expected = fastEndpoints * EVENTS;
    while (mixed.fast.size < expected) await sleep(20);
    const times = [...mixed.fast.values()].map((at) => at - started);
    return { fastEndpoints, expected, allFastMs: Math.max(...times), medianFastMs: median(times), ...mixed };
  } finally {
    await t.close();
  }
}

/**
 * A fast endpoint's deliveries per second (its `ready` notifications, by CONCURRENCY producers), with
 * `backlog` due attempts of BACKLOG_ENDPOINTS slow endpoints of the same library queued before them.
 */
async function fastBehindBacklog(backlog: number) {
  const t = await startTestApp({
    CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
    CUMULO_LOG_LEVEL: "silent",
    CUMULO_RATE_LIMIT: "1000000000/1h",
    CUMULO_WEBHOOK_ENDPOINTS_MAX: String(BACKLOG_ENDPOINTS + 1),
  });
  try {
    await t.cumulo.app?.compileSchemas();
    const organizationId = await organizationOf(t);
    const libraryId = await createLibrary(t.cumulo.services, organizationId);
    const endpoint = async (kind: string, event: string, index: number) => {
      const created = await t.request("POST", webhooksPath(libraryId), {
        json: {
          name: kind,
          url: `${receiverUrl.replace("/hook", "")}/mixed/${kind}/backlog${index}`,
          events: [event],
        },
      });
      if (created.status !== 201) throw new Error(`endpoint not created: ${created.text}`);
    };
    for (let index = 0; index < BACKLOG_ENDPOINTS; index++) await endpoint("slow", "created", index);
    await endpoint("fast", "ready", 0);
    const notify = (event: "created" | "ready") => () =>
      emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, { organizationId, libraryId, event });
    // Each notification queues one attempt per slow endpoint.
    await produceAll(notify("created"), Math.ceil(backlog / BACKLOG_ENDPOINTS));
    const fastReceived = () =>
      [...mixed.fast.keys()].filter((key) => key.startsWith("/mixed/fast/backlog")).length;
    const before = fastReceived();
    const started = now();
    await produceAll(notify("ready"), TOTAL);
    while (fastReceived() - before < TOTAL) await sleep(5);
    return TOTAL / ((now() - started) / 1000);
  } finally {
    await t.close();
  }
}

const base = await baseline();
const ours = await cumulo();
const senderFigures = process.env.BENCH_SENDER === "1" ? await senderAlone() : undefined;
const apart = process.env.BENCH_PHASES === "1" ? await phases() : undefined;
const fair = ENDPOINTS > 0 ? await fairness() : undefined;
const behind =
  BACKLOG > 0 ? { without: await fastBehindBacklog(0), with: await fastBehindBacklog(BACKLOG) } : undefined;
await agent.close();
server.close();

const fmt = (n: number) => n.toFixed(n < 10 ? 2 : 0);
console.log(
  `webhook delivery benchmark (${TOTAL} deliveries, store: ${ours.store}, concurrency per endpoint ${CONCURRENCY})`,
);
console.log(
  `  direct undici:  ${fmt(base.throughput)} requests/s, ${fmt(base.cpuPerItem)} µs CPU per request (client and receiver), median latency ${fmt(base.latency)} ms`,
);
console.log(
  `  cumulo:         ${fmt(ours.throughput)} deliveries/s (notifications committed at ${fmt(ours.emittedPerSecond)}/s), ${fmt(ours.cpuPerItem)} µs CPU per delivery (notification, delivery and receiver), median event-to-receipt ${fmt(ours.latency)} ms`,
);
if (ours.postgresCpuPerItem !== undefined) {
  console.log(
    `                  PostgreSQL backends serving Cumulo meanwhile: ${fmt(ours.postgresCpuPerItem)} µs CPU per delivery`,
  );
}
if (statements.size > 0) {
  console.log("  statements per delivery (sustained run):");
  for (const [text, count] of [...statements].sort((a, b) => b[1] - a[1])) {
    console.log(`    ${(count / TOTAL).toFixed(3)}  ${text}`);
  }
}
if (senderFigures) {
  console.log(
    `  sender alone:   ${fmt(senderFigures.sender)} µs CPU per request against ${fmt(senderFigures.direct)} for the direct posts (median of ${senderFigures.rounds} alternated rounds of ${TOTAL})`,
  );
}
if (apart) {
  console.log(
    `  apart:          notifications alone ${fmt(apart.emits.perSecond)}/s (${fmt(apart.emits.cpuPerItem)} µs CPU each, no dispatcher running); that backlog drained at ${fmt(apart.drain.perSecond)} deliveries/s (${fmt(apart.drain.cpuPerItem)} µs CPU each, receiver included)`,
  );
}
if (fair) {
  console.log(
    `fairness: ${ENDPOINTS} endpoints (${fair.fastEndpoints} fast, 10% slow answering after ${SLOW_MS} ms, 10% failing with 500), ${EVENTS} notifications each`,
  );
  console.log(
    `  fast endpoints: all ${fair.expected} deliveries received ${fmt(fair.allFastMs)} ms after the first notification (median ${fmt(fair.medianFastMs)} ms); meanwhile ${fair.slow} slow and ${fair.failing} failing attempts sent`,
  );
}
if (behind) {
  console.log(
    `backlog: a fast endpoint's deliveries while ${BACKLOG_ENDPOINTS === 1 ? "another endpoint" : `${BACKLOG_ENDPOINTS} other endpoints`} of its library, answering after ${SLOW_MS} ms, ${BACKLOG_ENDPOINTS === 1 ? "has" : "have"} ${BACKLOG} attempts due`,
  );
  console.log(
    `  fast endpoint:  ${fmt(behind.with)} deliveries/s behind the backlog, ${fmt(behind.without)}/s without it`,
  );
}
console.log(
  `  ratio:          throughput ${(ours.throughput / base.throughput).toFixed(3)} of direct, CPU per item ${(base.cpuPerItem / ours.cpuPerItem).toFixed(3)} of direct's, latency ${(ours.latency / base.latency).toFixed(1)}x direct${fair ? `; every fast delivery done at ${(fair.allFastMs / SLOW_MS).toFixed(2)} of one slow answer` : ""}${behind ? `; behind a slow endpoint's backlog ${(behind.with / behind.without).toFixed(3)} of the fast endpoint's speed without it` : ""}`,
);
process.exit(0);
