import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PlaybackTokens } from "../../src/video/tokens.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { videoPath } from "./support.ts";

// Token issuing only (no ffmpeg): any video of the library may get a token, whatever its status.
describe("playback token requests", () => {
  let t: TestApp;
  let libraryId: string;
  let videoId: string;
  beforeAll(async () => {
    t = await startTestApp();
    libraryId = (await createLibrary(t)).id;
    videoId = (await createVideo(t, libraryId)).id;
  });
  afterAll(() => t.close());

  it("takes no body, an empty JSON body or {} as the defaults, and refuses malformed JSON", async () => {
    const path = `${videoPath(libraryId, videoId)}/playback-token`;
    const json = { "content-type": "application/json" };
    for (const options of [{}, { headers: json, body: "" }, { json: {} }]) {
      const response = await t.request("POST", path, options);
      expect(response.status, response.text).toBe(201);
      expect(response.body.data.expires).toBeGreaterThan(Date.now() / 1000 + 3590);
      expect(response.body.data.manifest_url).toContain(`token=${response.body.data.token}`);
    }
    const malformed = await t.request("POST", path, { headers: json, body: '{"expires_in_s":' });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ success: false, message: "Invalid Request" });
  });
});

describe("playback token lifetime", () => {
  it("lives at least the seconds asked for, whatever the fraction of the second it was issued in", () => {
    let nowMs = 100_900;
    const tokens = new PlaybackTokens(() => Buffer.alloc(32, 1), { now: () => new Date(nowMs) });
    const { token, expires } = tokens.issue("video", 1);
    const check = () => tokens.check("video", token, String(expires));
    nowMs = 101_899;
    expect(check()).toBe("valid");
    nowMs = expires * 1000;
    expect(check()).toBe("expired");
  });
});
