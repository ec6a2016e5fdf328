import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Issuer } from "../../src/identity/service.ts";
import { createLibrary, createVideo, fieldErrors } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { adminOrganizationId, createConsoleUser, signIn, withSession } from "../support/console.ts";
import { generateClip } from "../support/media.ts";
import { videoPath, waitForStatus } from "../video/support.ts";
import { runUpload, sha256, storedSource, TUS_PATH } from "./support.ts";

const ORIGIN = "https://app.example.com";

describe("signed browser uploads (no API key)", () => {
  let t: TestApp;
  let work: string;
  let clip: Buffer;
  let libraryId: string;
  const tus = { "tus-resumable": "1.0.0" };

  const authorize = async (videoId: string, body: Record<string, unknown> = {}) => {
    const response = await t.request("POST", `${videoPath(libraryId, videoId)}/upload-authorization`, {
      json: body,
    });
    expect(response.status, response.text).toBe(201);
    return response.body.data as {
      endpoint: string;
      expires: number;
      signature: string;
      headers: Record<string, string>;
    };
  };
  const create = (headers: Record<string, string>, metadata?: string) =>
    fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: {
        ...tus,
        origin: ORIGIN,
        "upload-length": "100",
        ...(metadata ? { "upload-metadata": metadata } : {}),
        ...headers,
      },
    });

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-signed-"));
    let file: string;
    [t, file] = await Promise.all([
      startTestApp({ CUMULO_RATE_LIMIT: "100000/1m", CUMULO_PUBLIC_URL: "http://api.cumulo.test" }),
      generateClip(work, { seconds: 2, width: 320, height: 240 }),
    ]);
    clip = readFileSync(file);
    libraryId = (await createLibrary(t)).id;
  });
  afterAll(async () => {
    await t?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("issues an authorization for one video and a tus-js-client upload with only its headers reaches ready", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    const authorization = await authorize(videoId, { expires_in_s: 600 });
    expect(authorization.endpoint).toBe(`http://api.cumulo.test${TUS_PATH}`);
    expect(authorization.expires).toBeGreaterThan(Date.now() / 1000 + 590);
    // The issuer (the admin key, `k{id}`), then the HMAC.
    expect(authorization.signature).toMatch(/^k[1-9]\d*\.[0-9a-f]{64}$/);
    expect(authorization.headers).toEqual({
      AuthorizationSignature: authorization.signature,
      AuthorizationExpire: String(authorization.expires),
      LibraryId: libraryId,
      VideoId: videoId,
    });

    await runUpload(clip, {
      endpoint: `${t.baseUrl}${TUS_PATH}`,
      chunkSize: 32 * 1024,
      headers: { ...authorization.headers, origin: ORIGIN },
      metadata: { filename: "clip.mp4", filetype: "video/mp4" },
    });
    expect(sha256(await storedSource(t, videoId))).toBe(sha256(clip));
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
  });

  it("answers browsers on other origins: preflight, exposed headers, and readable refusals", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    const { headers } = await authorize(videoId);
    const preflight = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "OPTIONS",
      headers: {
        origin: ORIGIN,
        "access-control-request-method": "POST",
        "access-control-request-headers":
          "authorizationsignature,authorizationexpire,libraryid,videoid,tus-resumable,upload-length",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
    const allowed = (preflight.headers.get("access-control-allow-headers") ?? "").toLowerCase();
    for (const name of [
      "authorizationsignature",
      "authorizationexpire",
      "libraryid",
      "videoid",
      "upload-length",
    ]) {
      expect(allowed).toContain(name);
    }
    expect(preflight.headers.get("access-control-allow-methods")).toContain("PATCH");
    expect(preflight.headers.get("tus-version")).toBe("1.0.0");
    expect(preflight.headers.get("tus-extension")).toContain("termination");

    const created = await create(headers);
    expect(created.status).toBe(201);
    expect(created.headers.get("access-control-allow-origin")).toBe("*");
    const exposed = (created.headers.get("access-control-expose-headers") ?? "").toLowerCase();
    for (const name of ["location", "upload-offset", "tus-resumable"]) expect(exposed).toContain(name);

    const refused = await create({ ...headers, AuthorizationSignature: "0".repeat(64) });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("access-control-allow-origin")).toBe("*");
  });

  it("refuses an expired, tampered or foreign authorization", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    const otherVideoId = (await createVideo(t, libraryId)).id;
    const { headers } = await authorize(videoId);
    const { signer } = t.cumulo.services.uploads.authorizations;
    const issuer = headers.AuthorizationSignature?.split(".")[0] as Issuer;

    const pastExpires = Math.floor(Date.now() / 1000) - 10;
    const expired = await create({
      ...headers,
      AuthorizationSignature: signer.sign(issuer, libraryId, videoId, pastExpires),
      AuthorizationExpire: String(pastExpires),
    });
    expect(expired.status).toBe(401);
    expect(await expired.json()).toMatchObject({
      success: false,
      error: "unauthorized",
      message: expect.stringMatching(/expired/),
    });

    // A later expiry than the one signed, or another video under the same signature.
    const stretched = await create({
      ...headers,
      AuthorizationExpire: String(Number(headers.AuthorizationExpire) + 3600),
    });
    expect(stretched.status).toBe(401);
    const retargeted = await create({ ...headers, VideoId: otherVideoId });
    expect(retargeted.status).toBe(401);
    // Another issuer under the same MAC, and the MAC without its issuer (the form before issuers).
    const [, mac] = (headers.AuthorizationSignature ?? "").split(".");
    expect((await create({ ...headers, AuthorizationSignature: `k999999.${mac}` })).status).toBe(401);
    expect((await create({ ...headers, AuthorizationSignature: mac ?? "" })).status).toBe(401);
    // Metadata naming another video than the signed one.
    const named = await create(headers, `video_id ${btoa(otherVideoId)}`);
    expect(named.status).toBe(403);

    // Another video's upload (created with the API key) does not exist for this authorization.
    const theirs = await create(
      { authorization: `Bearer ${t.adminKey}` },
      `library_id ${btoa(libraryId)},video_id ${btoa(otherVideoId)}`,
    );
    expect(theirs.status).toBe(201);
    const theirUrl = new URL(theirs.headers.get("location") ?? "", `${t.baseUrl}${TUS_PATH}/`).toString();
    const peek = await fetch(theirUrl, { method: "HEAD", headers: { ...tus, ...headers } });
    expect(peek.status).toBe(404);
    const terminate = await fetch(theirUrl, { method: "DELETE", headers: { ...tus, ...headers } });
    expect(terminate.status).toBe(404);

    // The authorization opens nothing but the tus endpoint.
    const elsewhere = await fetch(`${t.baseUrl}${videoPath(libraryId, videoId)}`, { headers });
    expect(elsewhere.status).toBe(401);
  });

  it("stops working once the key that made it is revoked, or the person who made it is removed", async () => {
    const organizationId = await adminOrganizationId(t);
    const { identity } = t.cumulo.services;
    const made = await identity.createApiKey(organizationId, { name: "ci", readOnly: false });
    if (made.outcome !== "created") throw new Error(made.outcome);
    const videoId = (await createVideo(t, libraryId)).id;
    const byKey = await t.request("POST", `${videoPath(libraryId, videoId)}/upload-authorization`, {
      key: made.api_key,
      json: {},
    });
    expect(byKey.status, byKey.text).toBe(201);
    const keyHeaders = byKey.body.data.headers as Record<string, string>;
    const started = await create(keyHeaders);
    expect(started.status).toBe(201);
    const upload = new URL(started.headers.get("location") ?? "", `${t.baseUrl}${TUS_PATH}/`).toString();

    await identity.revokeApiKey(made.id);
    const revoked = await create(keyHeaders);
    expect(revoked.status).toBe(401);
    expect(await revoked.json()).toMatchObject({
      error: "unauthorized",
      message: expect.stringMatching(/revoked/),
    });
    // Also in the middle of an upload it began.
    const resumed = await fetch(upload, { method: "HEAD", headers: { ...tus, ...keyHeaders } });
    expect(resumed.status).toBe(401);

    const user = await createConsoleUser(t, { email: "uploader@example.test" });
    const session = await signIn(t, "uploader@example.test");
    const bySession = await t.request("POST", `${videoPath(libraryId, videoId)}/upload-authorization`, {
      ...withSession(session),
      json: {},
    });
    expect(bySession.status, bySession.text).toBe(201);
    const personHeaders = bySession.body.data.headers as Record<string, string>;
    expect(personHeaders.AuthorizationSignature).toMatch(/^u\d+\./);
    expect((await create(personHeaders)).status).toBe(201);
    await t.cumulo.services.console.removeUser(user.id);
    expect((await create(personHeaders)).status).toBe(401);
  });

  it("refuses a wrong API key sent beside a valid authorization", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    const { headers } = await authorize(videoId);
    const wrong = await create({ ...headers, authorization: "Bearer cmk_not_a_key_of_anyone_0123456789" });
    expect(wrong.status).toBe(401);
    expect((await create({ ...headers, authorization: `Bearer ${t.adminKey}` })).status).toBe(201);
  });

  it("issues authorizations only for the caller's videos, within the allowed lifetime", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    const other = await t.createOrganization();
    const foreign = await t.request("POST", `${videoPath(libraryId, videoId)}/upload-authorization`, {
      key: other.key,
      json: {},
    });
    expect(foreign.status).toBe(404);
    for (const expires_in_s of [10, 8 * 86_400, "60"]) {
      const bad = await t.request("POST", `${videoPath(libraryId, videoId)}/upload-authorization`, {
        json: { expires_in_s },
      });
      expect(bad.status).toBe(400);
      expect(Object.keys(fieldErrors(bad.body))).toEqual(["expires_in_s"]);
    }
    const anonymous = await t.request("POST", `${videoPath(libraryId, videoId)}/upload-authorization`, {
      anonymous: true,
      json: {},
    });
    expect(anonymous.status).toBe(401);
  });
});
