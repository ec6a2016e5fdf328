import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { edgeRequest, edgeUrlOf } from "../cdn/support.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { generateClip } from "../support/media.ts";
import { databaseOf, endConnections, onAdminDatabase, testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { fileBytes, playlistUris, resolvePath, uploadSource, videoPath, waitForStatus } from "./support.ts";

/**
 * A library's videos through a PostgreSQL outage (a restart, a failover): those watched just before
 * it go on playing from the last reads of their library and video (docs/operations.md); with the
 * store back, every request reads it again.
 */
describe.runIf(testStoreKind() === "postgres")("playback while PostgreSQL is away", () => {
  let t: TestApp;
  let work: string;
  let database: string;
  let libraryId: string;
  let watched: string;
  let unwatched: string;
  let edge: string;
  const pathTo = (videoId: string, file: string) => `/${libraryId}.media.cumulo.local/${videoId}/${file}`;
  const play = (videoId: string, file: string) => edgeRequest(edge, pathTo(videoId, file));

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-playback-outage-"));
    let clip: string;
    [t, clip] = await Promise.all([
      startTestApp({ CUMULO_EDGE_PORT: "0", CUMULO_PG_CONNECT_TIMEOUT_MS: "1000" }),
      generateClip(work),
    ]);
    database = databaseOf(t.store);
    edge = edgeUrlOf(t);
    libraryId = (await createLibrary(t, { name: "Outage", default_privacy: "public" })).id;
    [watched, unwatched] = await Promise.all(
      ["watched", "unwatched"].map(async (title) => {
        const id = (await createVideo(t, libraryId, { title })).id as string;
        expect((await uploadSource(t, libraryId, id, fileBytes(clip))).status).toBe(202);
        return id;
      }),
    );
    for (const id of [watched, unwatched]) {
      expect((await waitForStatus(t, libraryId, id, ["ready", "failed"])).status).toBe("ready");
    }
  }, 120_000);
  afterAll(async () => {
    await onAdminDatabase(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`);
    await t?.close();
    rmSync(work, { recursive: true, force: true });
  });

  /** The master playlist, a rung's playlist, its first segment, the MP4 and the thumbnail: each status. */
  const playThrough = async (videoId: string) => {
    const master = await play(videoId, "playlist.m3u8");
    const rung = resolvePath(pathTo(videoId, "playlist.m3u8"), playlistUris(master.text)[0] ?? "");
    const rungPlaylist = await edgeRequest(edge, rung);
    const first = await edgeRequest(edge, resolvePath(rung, playlistUris(rungPlaylist.text)[0] ?? ""));
    return [
      master.status,
      rungPlaylist.status,
      first.status,
      (await play(videoId, "play.mp4")).status,
      (await play(videoId, "thumbnail.jpg")).status,
    ];
  };

  const embed = (videoId: string) => fetch(`${t.baseUrl}/embed/${libraryId}/${videoId}`);

  it("plays what was watched just before, refuses the rest with 503, and reads the store again once it is back", async () => {
    expect(await playThrough(watched)).toEqual([200, 200, 200, 200, 200]);
    expect((await embed(watched)).status).toBe(200);

    await onAdminDatabase(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`);
    await endConnections(database);
    await waitUntil(
      async () => (await t.request("GET", "/v1/media/libraries")).status === 503,
      5000,
      "the node to lose its connections",
    );
    expect(await playThrough(watched)).toEqual([200, 200, 200, 200, 200]);
    expect((await embed(watched)).status).toBe(200);
    const never = await play(unwatched, "playlist.m3u8");
    expect([never.status, never.headers["retry-after"]]).toEqual([503, "5"]);

    await onAdminDatabase(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`);
    await waitUntil(
      async () => (await t.request("GET", "/v1/media/libraries")).status === 200,
      10_000,
      "the store back",
    );
    // A deletion holds at once: nothing kept stands in for the store while it answers.
    expect((await t.request("DELETE", videoPath(libraryId, watched))).status).toBe(200);
    expect((await play(watched, "playlist.m3u8")).status).toBe(404);
    expect(await playThrough(unwatched)).toEqual([200, 200, 200, 200, 200]);
  });
});
