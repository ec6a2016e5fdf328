import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { sendRaw } from "../fuzz/raw-http.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

/** Credentials never reach the log, at any level: not in a request's URL, not in refused bytes. */
describe("secrets and the log", () => {
  let t: TestApp;
  const { logger, lines } = capturingLogger("debug");
  const logged = () => JSON.stringify(lines);
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_LOG_LEVEL: "debug" }, { logger });
  });
  afterAll(() => t.close());

  it("masks credentials in the query of a logged request (a playback token on the embed page)", async () => {
    const token = "playback-token-that-must-not-be-logged";
    const path = `/embed/00000000-0000-4000-8000-000000000000/00000000-0000-4000-8000-000000000001?token=${token}&expires=99`;
    expect((await fetch(t.baseUrl + path)).status).toBe(404);
    expect(logged()).not.toContain(token);
    expect(logged()).toContain("token=***&expires=99");
  });

  it("masks keys under any credential name, in any case, and a Cumulo API key under any name", async () => {
    const sent = {
      AccessKey: "bunny-style-access-key",
      auth: "auth-value-not-logged",
      SessionId: "session-id-not-logged",
      cred: "cred-value-not-logged",
      API_KEY: "api-key-not-logged",
      "api-key": "hyphenated-key-not-logged",
      Private_Key: "private-key-not-logged",
      access_token: "access-token-not-logged",
      passwd: "passwd-not-logged",
      passphrase: "passphrase-not-logged",
      otp: "one-time-password-not-logged",
      q: `cmk_${"k".repeat(43)}`,
    };
    const query = `${new URLSearchParams(sent)}&page=2`;
    expect((await fetch(`${t.baseUrl}/v1/media/libraries?${query}`)).status).toBe(401);
    expect((await fetch(`${t.baseUrl}/v1/media/libraries?cmk_${"b".repeat(43)}`)).status).toBe(401);
    for (const value of Object.values(sent)) expect(logged()).not.toContain(value);
    expect(logged()).not.toContain(`cmk_${"b".repeat(43)}`);
    const masked = Object.keys(sent)
      .map((name) => `${name}=***`)
      .join("&");
    expect(logged()).toContain(`${masked}&page=2`);
  });

  // QA of 6 December (session 47): a webhook signing secret in the query, and a key in the path,
  // were logged as sent.
  it("masks a webhook signing secret under any name, and a Cumulo credential in the path", async () => {
    const signing = `whsec_${"s".repeat(44)}`;
    const key = `cmk_${"p".repeat(43)}`;
    expect((await fetch(`${t.baseUrl}/healthz?x=${signing}&page=3`)).status).toBe(200);
    expect((await fetch(`${t.baseUrl}/v1/media/libraries/${key}/videos?page=4`)).status).toBe(401);
    expect((await fetch(`${t.baseUrl}/v1/media/libraries/${signing}`)).status).toBe(401);
    // Percent-encoded, or after a word (QA of session 47).
    const encoded = `cmk%5F${"e".repeat(43)}`;
    const afterBearer = `Bearer%20cmk_${"f".repeat(43)}`;
    expect((await fetch(`${t.baseUrl}/v1/media/libraries/${encoded}`)).status).toBe(401);
    expect((await fetch(`${t.baseUrl}/v1/media/libraries/${afterBearer}`)).status).toBe(401);
    expect(logged()).not.toContain("e".repeat(43));
    expect(logged()).not.toContain("f".repeat(43));
    expect(logged()).not.toContain(signing);
    expect(logged()).not.toContain(key);
    expect(logged()).toContain("/healthz?x=***&page=3");
    expect(logged()).toContain("/v1/media/libraries/***/videos?page=4");
  });

  it("takes a name for a credential's by its words, not by a substring of it", async () => {
    const secret = {
      api_key: "underscored-key-not-logged",
      "X-Api-Key": "header-style-key-not-logged",
      accessKey: "camel-case-key-not-logged",
      auth_token: "auth-token-not-logged",
      sessionId: "session-id-camel-not-logged",
      clientsecret: "run-together-secret-not-logged",
      PHPSESSID: "php-session-not-logged",
    };
    const harmless = {
      sortkey: "title",
      monkey: "business",
      keyboard: "qwerty",
      authors: "ada",
      sessions: "12",
      key_id: "k-17",
    };
    const query = new URLSearchParams({ ...secret, ...harmless });
    expect((await fetch(`${t.baseUrl}/v1/media/libraries?${query}`)).status).toBe(401);
    for (const value of Object.values(secret)) expect(logged()).not.toContain(value);
    const masked = Object.keys(secret)
      .map((name) => `${name}=***`)
      .join("&");
    expect(logged()).toContain(`${masked}&${new URLSearchParams(harmless)}`);
  });

  it("logs a request the HTTP parser refuses by its reason, not by its bytes", async () => {
    const answer = await sendRaw(
      t.baseUrl,
      `GET /v1/media/libraries HTTP/1.1\r\nHost: x\r\nX-API-Key: ${t.adminKey}\r\nBad Header: y\r\n\r\n`,
    );
    expect(answer?.status).toBe(400);
    const refusal = lines.find((line) => line.msg === "client error");
    expect(refusal).toMatchObject({ code: expect.any(String), reason: expect.any(String) });
    expect(logged()).not.toContain("rawPacket");
    expect(logged()).not.toContain(t.adminKey);
  });
});
