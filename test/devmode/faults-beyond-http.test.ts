import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { generateClip } from "../support/media.ts";
import { waitUntil } from "../support/wait.ts";
import { fileBytes, uploadSource, videoPath, waitForStatus } from "../video/support.ts";
import {
  createEndpoint,
  emitVideoEvent,
  organizationOf,
  type Receiver,
  startReceiver,
  webhooksPath,
} from "../webhooks/helpers.ts";

/** Retries an hour apart: none falls due within the test. */
const SLOW_RETRIES = { max_attempts: 3, initial_delay_s: 3600, multiplier: 1, max_delay_s: 3600 };

describe("fault rules for webhook deliveries and video processing", () => {
  let t: TestApp;
  let receiver: Receiver;
  let work: string;
  let clip: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-dev-faults-"));
    receiver = await startReceiver();
    [t, clip] = await Promise.all([
      startTestApp({ CUMULO_DEV_MODE: "true", CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" }),
      generateClip(work, { seconds: 1 }),
    ]);
  });
  afterAll(async () => {
    await receiver.close();
    await t.close();
    rmSync(work, { recursive: true, force: true });
  });

  const deliveriesOf = async (libraryId: string, endpointId: string) =>
    (await t.request("GET", `${webhooksPath(libraryId)}/${endpointId}/events`)).body.data as {
      error: string | null;
      response_status: number;
    }[];

  it("fails webhook deliveries with a status, or as a timeout, marked in the delivery's error", async () => {
    const organizationId = await organizationOf(t);
    const libraryId = (await createLibrary(t, { name: "Hooked" })).id;
    const endpoint = await createEndpoint(t, libraryId, {
      url: `${receiver.url}/faulty`,
      retry_policy: SLOW_RETRIES,
    });
    const failing = await t.request("POST", "/_cumulo/faults", {
      json: { target: "webhook", url_prefix: `${receiver.url}/faulty`, status: 503, count: 1 },
    });
    expect(failing.status, failing.text).toBe(201);
    await emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
      organizationId,
      libraryId,
      event: "created",
    });
    const [failed] = await waitUntil(async () => {
      const deliveries = await deliveriesOf(libraryId, endpoint.id);
      return deliveries.some((d) => d.error) ? deliveries : undefined;
    });
    expect(failed?.response_status).toBe(503);
    expect(failed?.error).toBe(`injected fault ${failing.body.id}: answered 503`);

    const timing = await t.request("POST", "/_cumulo/faults", {
      json: { target: "webhook", timeout: true, count: 1 },
    });
    const otherLibrary = (await createLibrary(t, { name: "Hooked too" })).id;
    const other = await createEndpoint(t, otherLibrary, {
      url: `${receiver.url}/other`,
      retry_policy: SLOW_RETRIES,
    });
    await emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
      organizationId,
      libraryId: otherLibrary,
      event: "created",
    });
    const [timedOut] = await waitUntil(async () => {
      const deliveries = await deliveriesOf(otherLibrary, other.id);
      return deliveries.some((d) => d.error) ? deliveries : undefined;
    });
    expect(timedOut).toMatchObject({
      response_status: 0,
      error: `injected fault ${timing.body.id}: timed out`,
    });
    // Both rules were used up: nothing is left, and no request reached the receiver.
    expect((await t.request("GET", "/_cumulo/faults")).body.faults).toEqual([]);
    expect(receiver.received).toEqual([]);
  });

  it("fails a video at the chosen stage, with the rule named in its failure reason", async () => {
    const libraryId = (await createLibrary(t, { name: "Faulty videos" })).id;
    const videoId = (await createVideo(t, libraryId, { title: "Doomed" })).id;
    const rule = await t.request("POST", "/_cumulo/faults", {
      json: { target: "video", video_id: videoId, stage: "packaging" },
    });
    expect(rule.status, rule.text).toBe(201);
    expect((await uploadSource(t, libraryId, videoId, fileBytes(clip))).status).toBe(202);
    const failed = await waitForStatus(t, libraryId, videoId, ["failed", "ready"]);
    expect(failed.status).toBe("failed");
    const state = await t.request("GET", `${videoPath(libraryId, videoId)}/processing`);
    expect(state.body.data.failure_reason).toBe(`injected fault ${rule.body.id}: failed at packaging`);

    // Another video is not matched and is processed normally.
    const fine = (await createVideo(t, libraryId, { title: "Fine" })).id;
    expect((await uploadSource(t, libraryId, fine, fileBytes(clip))).status).toBe(202);
    expect((await waitForStatus(t, libraryId, fine, ["failed", "ready"])).status).toBe("ready");
    await t.request("DELETE", `/_cumulo/faults/${rule.body.id}`);
  });

  it("stops a video at the chosen stage, where it stays", async () => {
    const libraryId = (await createLibrary(t, { name: "Held videos" })).id;
    const videoId = (await createVideo(t, libraryId, { title: "Held" })).id;
    const rule = await t.request("POST", "/_cumulo/faults", {
      json: { target: "video", video_id: videoId, stage: "transcoding", stop: true, count: 1 },
    });
    expect(rule.status, rule.text).toBe(201);
    expect((await uploadSource(t, libraryId, videoId, fileBytes(clip))).status).toBe(202);
    // The rule is used once the processing job has reached the stage and stopped there.
    await waitUntil(async () => {
      const faults = (await t.request("GET", "/_cumulo/faults")).body.faults as { id: string }[];
      return faults.some((fault) => fault.id === rule.body.id) ? undefined : true;
    });
    // Its processing job ends there, leaving the video at the stage.
    await waitUntil(async () => {
      const jobs = await t.cumulo.store.db.selectFrom("jobs").select(["status", "payload"]).execute();
      const job = jobs.find((row) => row.payload.includes(videoId));
      return job && job.status === "done" ? job : undefined;
    });
    const held = await t.request("GET", videoPath(libraryId, videoId));
    expect(held.body.data.status).toBe("transcoding");
  });

  it("asks a video rule for its stage and a webhook rule for a status or a timeout", async () => {
    const noStage = await t.request("POST", "/_cumulo/faults", { json: { target: "video" } });
    expect(noStage.status).toBe(400);
    // A library that does not exist is 404, as an unknown organization is (it was a rule never applying).
    const nowhere = await t.request("POST", "/_cumulo/faults", {
      json: { target: "video", stage: "packaging", library_id: "00000000-0000-4000-8000-000000000000" },
    });
    expect(nowhere.status).toBe(404);
    const nothing = await t.request("POST", "/_cumulo/faults", { json: { target: "webhook" } });
    expect(nothing.status).toBe(400);
    expect(nothing.body.errors.map((error: { field: string }) => error.field)).toEqual(["status", "timeout"]);
    const noEffect = await t.request("POST", "/_cumulo/faults", { json: {} });
    expect(noEffect.body.errors.map((error: { field: string }) => error.field)).toEqual([
      "status",
      "latency_ms",
    ]);
  });
});
