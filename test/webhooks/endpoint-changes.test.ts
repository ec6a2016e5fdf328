import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import {
  createEndpoint,
  createLibrary,
  emitVideoEvent,
  header,
  organizationOf,
  type Receiver,
  signedWith,
  startReceiver,
  webhooksPath,
} from "./helpers.ts";

const PER_ENDPOINT = 8;
// More than one round of attempts to the endpoint: the next round waits in the dispatcher's hand.
const EVENTS = 12;

/**
 * Attempts are claimed ahead with their endpoint's settings of then (claim-ahead.test.ts). An
 * endpoint changed or deleted since must not have them sent with the old ones: an old secret signed,
 * and deleted or switched-off endpoints were sent to, seconds after the change (QA of 4 December).
 */
describe("webhook attempts held when their endpoint changes", () => {
  let t: TestApp;
  let receiver: Receiver;
  const held: ServerResponse[] = [];
  const releaseHeld = () => {
    for (const res of held.splice(0)) res.end("ok");
  };

  beforeAll(async () => {
    t = await startTestApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true", CUMULO_WEBHOOK_TIMEOUT_MS: "120000" });
    receiver = await startReceiver((request, res) => {
      if (request.path.endsWith("/held")) held.push(res);
      else res.end("ok");
    });
  });
  afterAll(async () => {
    releaseHeld();
    await receiver.close();
    await t.close();
  });

  /** An endpoint with one round of attempts held open by the receiver and the next one claimed. */
  async function busyEndpoint() {
    const organizationId = await organizationOf(t);
    const libraryId = await createLibrary(t.cumulo.services, organizationId);
    const endpoint = await createEndpoint(t, libraryId, { url: `${receiver.url}/held`, events: ["created"] });
    const before = receiver.received.length;
    for (let i = 0; i < EVENTS; i++) {
      await emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
        organizationId,
        libraryId,
        event: "created",
      });
    }
    await receiver.waitFor(before + PER_ENDPOINT, 20_000);
    await waitUntil(
      async () => {
        const sending = await t.cumulo.store.db
          .selectFrom("webhook_deliveries")
          .select("id")
          .where("endpoint_id", "=", endpoint.id)
          .where("state", "=", "sending")
          .execute();
        return sending.length > PER_ENDPOINT || undefined;
      },
      20_000,
      "the next round claimed ahead",
    );
    return { libraryId, endpoint, before };
  }

  it("sends nothing more to an endpoint deleted, or whose library is deleted", async () => {
    for (const remove of ["endpoint", "library"] as const) {
      const { libraryId, endpoint, before } = await busyEndpoint();
      const path =
        remove === "endpoint"
          ? `${webhooksPath(libraryId)}/${endpoint.id}`
          : `/v1/media/libraries/${libraryId}`;
      expect((await t.request("DELETE", path)).status).toBe(200);
      releaseHeld();
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(receiver.received.length - before, remove).toBe(PER_ENDPOINT);
    }
  });

  it("signs what it sends after a rotation without overlap with the new secret only, at its new URL", async () => {
    const { libraryId, endpoint, before } = await busyEndpoint();
    const rotated = await t.request("POST", `${webhooksPath(libraryId)}/${endpoint.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    const moved = await t.request("PATCH", `${webhooksPath(libraryId)}/${endpoint.id}`, {
      json: { url: `${receiver.url}/moved` },
    });
    expect(moved.status).toBe(200);
    const secret: string = rotated.body.data.secret;
    releaseHeld();
    const later = (await receiver.waitFor(before + EVENTS, 20_000)).slice(before + PER_ENDPOINT);
    expect(later.map((request) => request.path)).toEqual(Array(EVENTS - PER_ENDPOINT).fill("/moved"));
    for (const request of later) {
      expect(signedWith(secret, request), header(request.headers["webhook-signature"])).toBe(true);
      expect(header(request.headers["webhook-signature"]).split(" ")).toHaveLength(1);
    }
  });
});
