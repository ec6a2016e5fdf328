import { sql } from "kysely";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signedHeaders } from "../../src/webhooks/sender.ts";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import {
  createEndpoint,
  createLibrary,
  emitVideoEvent,
  organizationOf,
  type Received,
  type Receiver,
  startReceiver,
  storedSecret,
  webhooksPath,
} from "./helpers.ts";

/** A secret as versions before sealing generated and stored it: `whsec_` + base64, in plain text. */
const PLAIN_SECRET = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;

const verified = (secret: string, request: Received) =>
  new Webhook(secret).verify(request.body, {
    "webhook-id": String(request.headers["webhook-id"]),
    "webhook-timestamp": String(request.headers["webhook-timestamp"]),
    "webhook-signature": String(request.headers["webhook-signature"]),
  });

/**
 * Signing secrets at rest (docs/webhooks.md, Endpoints): nodes started one after another on one store,
 * as an upgrade from a version that kept them in plain text, and a restart with another secret key.
 */
describe("webhook signing secrets in the store", () => {
  let store: TestStore;
  let receiver: Receiver;
  let node: TestApp | undefined;
  /** What each node logged at `error` about the store's secrets at its start. */
  const startLines: string[][] = [];
  const startNode = async (secretKey: string) => {
    await node?.close();
    const { logger, lines } = capturingLogger("error");
    node = await startTestApp(
      { CUMULO_WEBHOOK_ALLOW_PRIVATE: "true", CUMULO_SECRET_KEY: secretKey },
      { store, logger },
    );
    startLines.push(lines.map((line) => String(line.msg)).filter((msg) => msg.startsWith("stored secrets")));
    return node;
  };

  beforeAll(async () => {
    store = await createMigratedTestStore();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await node?.close();
    await receiver.close();
    await store.drop();
  });

  it("signs with a plain-text secret of an older version, seals it at the next start, refuses to sign under another key until rotated", async () => {
    let t = await startNode("the installation's key");
    const organizationId = await organizationOf(t);
    const libraryId = await createLibrary(t.cumulo.services, organizationId);
    const endpoint = await createEndpoint(t, libraryId, { url: `${receiver.url}/in`, events: ["created"] });
    const path = `${webhooksPath(libraryId)}/${endpoint.id}`;
    // The row as an older version wrote it.
    await t.cumulo.store.db
      .updateTable("webhook_endpoints")
      .set({ secret: PLAIN_SECRET })
      .where("id", "=", endpoint.id)
      .execute();
    const emit = () =>
      emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
        organizationId,
        libraryId,
        event: "created",
      });

    await emit();
    const [first] = await receiver.waitFor(1);
    expect(verified(PLAIN_SECRET, first as Received)).toMatchObject({ event: "created" });
    expect((await t.request("GET", path)).body.data.secret).toBe(PLAIN_SECRET);
    expect((await t.cloud("GET", "/v1/storage/user")).status).toBe(200);

    // The next node to start seals it; it is answered and signs with as before.
    t = await startNode("the installation's key");
    const sealed = await storedSecret(t, endpoint.id);
    expect(sealed).toMatch(/^v1\./);
    expect(sealed).not.toContain(PLAIN_SECRET.slice("whsec_".length));
    expect((await t.request("GET", path)).body.data.secret).toBe(PLAIN_SECRET);
    await emit();
    const [, second] = await receiver.waitFor(2);
    expect(verified(PLAIN_SECRET, second as Received)).toMatchObject({ event: "created" });

    // Under another secret key nothing is sent with a signature the receiver would reject: the attempt
    // is recorded as failed, saying why, and the endpoint's and the S3 user's reads fail rather than answer a wrong secret.
    t = await startNode("some other key");
    // Said at once at its start, not first at a 500 (QA of 4 December, session 41).
    expect(startLines).toEqual([[], [], [expect.stringMatching(/do not open with this node's secret key/)]]);
    await emit();
    const failed = await waitUntil(
      () =>
        t.cumulo.store.db
          .selectFrom("webhook_deliveries")
          .select(["response_status", "error"])
          .where("endpoint_id", "=", endpoint.id)
          .where("attempt", "=", 1)
          .where("state", "=", "done")
          .execute()
          .then((rows) => (rows.length === 3 ? rows.find((row) => row.error !== null) : undefined)),
      10_000,
      "the attempt under the other key recorded",
    );
    expect(failed).toMatchObject({
      response_status: 0,
      error: "Not sent: the endpoint's signing secret could not be decrypted with the server's secret key",
    });
    expect(receiver.received).toHaveLength(2);
    // Not a 500: the operator's to put right, said in the group's error body (QA of 4 December, session 41).
    const unreadable = /^Stored secrets cannot be read on this server: its secret key is not the one/;
    const endpointRead = await t.request("GET", path);
    expect(endpointRead.status).toBe(503);
    expect(endpointRead.body).toEqual({
      success: false,
      error: "service_unavailable",
      message: expect.stringMatching(unreadable),
    });
    const s3Read = await t.cloud("GET", "/v1/storage/user");
    expect(s3Read.status).toBe(503);
    expect(s3Read.body).toEqual({ error: "service_unavailable", message: expect.stringMatching(unreadable) });
    expect(await storedSecret(t, endpoint.id)).toBe(sealed);

    // A change is refused before it is made, not answered 503 once made (QA of 5 December, session 43).
    const renamed = await t.request("PATCH", path, { json: { name: "renamed under the other key" } });
    expect(renamed.status).toBe(503);
    const stored = await t.cumulo.store.db
      .selectFrom("webhook_endpoints")
      .select("name")
      .where("id", "=", endpoint.id)
      .executeTakeFirstOrThrow();
    expect(stored.name).toBe(endpoint.name);

    // With the old key lost for good, a new secret puts the endpoint right: the old one, which
    // cannot sign, is not kept for an overlap even when one is asked for.
    const rotated = await t.request("POST", `${path}/rotate-secret`, {
      json: { previous_secret_expires_in_s: 3600 },
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body.data.previous_secret_expires_at).toBeUndefined();
    expect((await t.request("GET", path)).status).toBe(200);
    await emit();
    const [, , third] = await receiver.waitFor(3);
    expect(verified(rotated.body.data.secret, third as Received)).toMatchObject({ event: "created" });
  }, 60_000);

  // QA of 6 December (session 47): a receiver's credential in a custom header was kept in plain text,
  // where a copy of the store gave it away, while the signing secret beside it was sealed.
  it("keeps an endpoint's custom headers sealed, reads an older version's plain ones, seals them at the next start, and drops them with the lost key at a rotation", async () => {
    const credential = "Bearer receiver-credential-of-the-customer";
    // The key the store's secrets open with after the test before (its last rotation).
    const HEADERS_KEY = "some other key";
    let t = await startNode(HEADERS_KEY);
    const organizationId = await organizationOf(t);
    const libraryId = await createLibrary(t.cumulo.services, organizationId);
    const endpoint = await createEndpoint(t, libraryId, {
      url: `${receiver.url}/headers`,
      events: ["created"],
      headers: { Authorization: credential },
    });
    const path = `${webhooksPath(libraryId)}/${endpoint.id}`;
    const storedHeaders = async () =>
      (
        await t.cumulo.store.db
          .selectFrom("webhook_endpoints")
          .select(sql<string>`cast(headers as text)`.as("headers"))
          .where("id", "=", endpoint.id)
          .executeTakeFirstOrThrow()
      ).headers;
    expect(await storedHeaders()).toMatch(/^\{"WEBHOOK_ID":"v1\./);
    expect(await storedHeaders()).not.toContain("receiver-credential");
    // A node of an earlier version reads the sealed form as one header the sender skips (it reads as
    // `webhook-id`): during a rolling upgrade it sends no custom header rather than pieces of the
    // sealed text (QA of session 47).
    const asEarlierNodesReadIt = JSON.parse(await storedHeaders()) as Record<string, string>;
    const sentByThem = signedHeaders(
      {
        url: receiver.url,
        messageId: "msg_1",
        body: "{}",
        secret: PLAIN_SECRET,
        headers: asEarlierNodesReadIt,
      },
      new Date(),
      "Cumulo-Webhooks/earlier",
    );
    expect(Object.keys(sentByThem).sort()).toEqual([
      "content-type",
      "user-agent",
      "webhook-id",
      "webhook-signature",
      "webhook-timestamp",
    ]);
    expect((await t.request("GET", path)).body.data.headers).toEqual({ Authorization: credential });
    const emit = () =>
      emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
        organizationId,
        libraryId,
        event: "created",
      });
    const seen = () => receiver.received.filter((request) => request.path === "/headers");
    await emit();
    await waitUntil(() => seen().length === 1, 10_000, "the first delivery");
    expect(seen()[0]?.headers.authorization).toBe(credential);

    // The row as an older version wrote it: sent as it is, sealed by the next node to start.
    await t.cumulo.store.db
      .updateTable("webhook_endpoints")
      .set({ headers: JSON.stringify({ Authorization: credential }) })
      .where("id", "=", endpoint.id)
      .execute();
    await emit();
    await waitUntil(() => seen().length === 2, 10_000, "the delivery with plain headers");
    expect(seen()[1]?.headers.authorization).toBe(credential);
    // A node started with a wrong key leaves them plain: sealed under it, they would be lost once
    // the right key is back (QA of session 47).
    t = await startNode("a wrong key for a moment");
    expect(await storedHeaders()).toBe(JSON.stringify({ Authorization: credential }));
    t = await startNode(HEADERS_KEY);
    expect(await storedHeaders()).toMatch(/^\{"WEBHOOK_ID":"v1\./);
    expect((await t.request("GET", path)).body.data.headers).toEqual({ Authorization: credential });

    // Under another key: refused (503) until a rotation, which drops what cannot be opened any more.
    t = await startNode("a key that lost the headers");
    expect((await t.request("GET", path)).status).toBe(503);
    const rotated = await t.request("POST", `${path}/rotate-secret`, { json: {} });
    expect(rotated.status).toBe(200);
    expect(rotated.body.data.headers).toBeNull();
    const restored = await t.request("PATCH", path, { json: { headers: { Authorization: credential } } });
    expect(restored.body.data.headers).toEqual({ Authorization: credential });
  }, 60_000);
});
