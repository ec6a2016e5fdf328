import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exitOf, serve } from "../support/process.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";

const KEY = "crash_test_key_0123456789abcdef";

describe("crash safety", () => {
  let store: TestStore;
  let env: Record<string, string | undefined>;
  // Webhook receiver: takes the first few notifications, then answers 503 until the server is killed, so
  // the rest are still pending (waiting for their 5 s retry) or in flight when it dies, however quick
  // the dispatcher is next to the burst.
  const createdVideos = new Set<string>();
  const TAKEN_BEFORE_KILL = 10;
  let killed = false;
  const receiver = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => {
      body += chunk;
    });
    request.on("end", () => {
      const notification = JSON.parse(body) as { event: string; payload: { video_id?: string } };
      const videoId = notification.event === "created" ? notification.payload.video_id : undefined;
      setTimeout(() => {
        if (!killed && createdVideos.size >= TAKEN_BEFORE_KILL) return response.writeHead(503).end();
        if (videoId) createdVideos.add(videoId);
        response.writeHead(200).end();
      }, 50);
    });
  });
  let receiverUrl: string;
  beforeAll(async () => {
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    store = await createMigratedTestStore();
    env = {
      CUMULO_DATA_DIR: store.dataDir,
      DATABASE_URL: store.databaseUrl,
      CUMULO_BOOTSTRAP_API_KEY: KEY,
      CUMULO_RATE_LIMIT: "100000/1m",
      CUMULO_LOG_LEVEL: "warn",
      CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
      // The delivery lease is twice the timeout: attempts held by the killed process are taken over sooner.
      CUMULO_WEBHOOK_TIMEOUT_MS: "2000",
    };
  });
  afterAll(async () => {
    receiver.close();
    await store.drop();
  });

  it("keeps every acknowledged write through a SIGKILL mid-burst, and finishes pending work after restart", async () => {
    const first = await serve(env);
    const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
    const post = (path: string, body: unknown) =>
      fetch(`${first.apiUrl}${path}`, { method: "POST", headers, body: JSON.stringify(body) });
    const hooked = (
      (await (await post("/v1/media/libraries", { name: "hooked" })).json()) as { data: { id: string } }
    ).data.id;
    const endpoint = await post(`/v1/media/libraries/${hooked}/webhooks`, {
      name: "receiver",
      url: receiverUrl,
      events: ["created"],
    });
    expect(endpoint.status).toBe(201);

    const acknowledged: string[] = [];
    const distributions: string[] = [];
    const videos: string[] = [];
    let sent = 0;
    const writer = async () => {
      while (!killed) {
        const index = sent++;
        try {
          if (index % 2 === 0) {
            const response = await post("/v1/media/libraries", { name: `burst ${index}` });
            if (response.status === 201) {
              const library = ((await response.json()) as { data: { id: string; distribution_id: string } })
                .data;
              acknowledged.push(library.id);
              distributions.push(library.distribution_id);
            }
          } else {
            const response = await post(`/v1/media/libraries/${hooked}/videos`, { title: `burst ${index}` });
            if (response.status === 201)
              videos.push(((await response.json()) as { data: { id: string } }).data.id);
          }
        } catch {
          // The connection died with the server: this write was never acknowledged.
        }
        if (acknowledged.length >= 40 && videos.length >= 40 && !killed) {
          killed = true;
          first.child.kill("SIGKILL");
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, writer));
    expect(await exitOf(first.child)).toBeNull();
    // Some notifications had not reached the receiver when the process died: the restart must send them.
    expect(videos.filter((id) => !createdVideos.has(id)).length).toBeGreaterThan(0);
    expect(acknowledged.length).toBeGreaterThanOrEqual(40);

    const second = await serve(env);
    try {
      const base = second.apiUrl;
      for (const id of acknowledged) {
        const response = await fetch(`${base}/v1/media/libraries/${id}`, { headers });
        expect(response.status, id).toBe(200);
      }
      // Each acknowledged library's distribution was written with it.
      expect(distributions).toHaveLength(acknowledged.length);
      for (const id of distributions) {
        const response = await fetch(`${base}/v1/cdn/distributions/${id}`, { headers });
        expect(response.status, id).toBe(200);
      }
      for (const id of videos) {
        const response = await fetch(`${base}/v1/media/libraries/${hooked}/videos/${id}`, { headers });
        expect(response.status, id).toBe(200);
      }
      // Provisioning jobs pending or held by the dead process (their 10 s lease) are picked up again.
      const deadline = Date.now() + 30_000;
      let pending = acknowledged.length;
      while (Date.now() < deadline) {
        const list = await fetch(`${base}/v1/media/libraries?limit=100&page=1`, { headers });
        const pages = (await list.json()) as {
          data: { status: string }[];
          meta: { pagination: { total: number } };
        };
        expect(pages.meta.pagination.total).toBeGreaterThanOrEqual(acknowledged.length);
        let notActive = pages.data.filter((library) => library.status !== "active").length;
        for (let page = 2; page <= Math.ceil(pages.meta.pagination.total / 100); page++) {
          const more = await fetch(`${base}/v1/media/libraries?limit=100&page=${page}`, { headers });
          notActive += ((await more.json()) as { data: { status: string }[] }).data.filter(
            (l) => l.status !== "active",
          ).length;
        }
        pending = notActive;
        if (pending === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(pending).toBe(0);
      // The `created` notification of every acknowledged video reaches the receiver, including those
      // pending or in flight when the first process died (their leases run out and they are retried).
      const missing = () => videos.filter((id) => !createdVideos.has(id));
      const webhookDeadline = Date.now() + 30_000;
      while (missing().length > 0 && Date.now() < webhookDeadline) {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(missing()).toEqual([]);
    } finally {
      second.child.kill("SIGTERM");
      await exitOf(second.child);
    }
  }, 90_000);
});
