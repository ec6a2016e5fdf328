import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import {
  addressesResource,
  authenticatedOperations,
  createTenantResources,
  exampleBody,
  isGroupError,
  isNotFound,
  isWrite,
  type MatrixOperation,
  missingCredentialBody,
  rightHeader,
  type TenantResources,
  urlOf,
  wrongHeader,
} from "../support/auth-matrix.ts";
import { createConsoleUser, type SignedIn, signIn } from "../support/console.ts";

/**
 * Every authenticated operation of `/openapi.json`, called by every kind of caller that must be
 * refused: no key, the key in a header of another group, a revoked key, a read-only key on a write,
 * and another organization on a resource that exists. The resources are real (made through the API),
 * and the owner's own reads of them succeed, so each refusal is for the reason it is checked for.
 */
describe("auth and tenant matrix over every operation", () => {
  let t: TestApp;
  let operations: MatrixOperation[];
  let ours: TenantResources;
  let revokedKey: string;
  let readOnlyKey: string;
  /** Console sessions of an admin and of a read-only user of the owner's organization. */
  let adminSession: SignedIn;
  let readerSession: SignedIn;
  let otherKey: string;
  /** What the other organization sends of its own in a body (its billing account). */
  let theirs: TenantResources;

  beforeAll(async () => {
    t = await startTestApp({ CUMULO_RATE_LIMIT: "1000000/1m" });
    operations = await authenticatedOperations(t);
    ours = await createTenantResources(t, t.adminKey);
    const identity = t.cumulo.services.identity;
    const organizationId = (await identity.authenticate(t.adminKey))?.organizationId ?? "";
    const revoked = await identity.createApiKey(organizationId, { name: "revoked", readOnly: false });
    const readOnly = await identity.createApiKey(organizationId, { name: "reader", readOnly: true });
    if (revoked.outcome !== "created" || readOnly.outcome !== "created") throw new Error("keys not created");
    await identity.revokeApiKey(revoked.id);
    revokedKey = revoked.api_key;
    readOnlyKey = readOnly.api_key;
    adminSession = await signIn(t, (await createConsoleUser(t, { email: "matrix@example.test" })).email);
    readerSession = await signIn(
      t,
      (await createConsoleUser(t, { email: "matrix-reader@example.test", readOnly: true })).email,
    );
    const other = await t.createOrganization("Matrix rival");
    otherKey = other.key;
    theirs = { ...ours, set_id: other.billingAccountId };
  });
  afterAll(async () => {
    await t.close();
  });

  async function call(
    operation: MatrixOperation,
    headers: Record<string, string>,
    bodyFrom: TenantResources | undefined = undefined,
  ) {
    const body = bodyFrom ? exampleBody(operation, bodyFrom) : undefined;
    const response = await fetch(t.baseUrl + urlOf(operation, ours), {
      method: operation.method,
      headers: {
        ...headers,
        // The tus protocol's routes refuse a request without its version before anything else.
        ...(operation.path.startsWith("/v1/media/tus") ? { "tus-resumable": "1.0.0" } : {}),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body,
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: response.status, body: parsed as any, text };
  }

  /** Runs `check` over the operations, collecting every miss so one run lists them all. */
  async function everyOperation(
    select: (operation: MatrixOperation) => boolean,
    check: (operation: MatrixOperation) => Promise<string | undefined>,
  ) {
    const selected = operations.filter(select);
    expect(selected.length).toBeGreaterThan(0);
    const misses: string[] = [];
    for (const operation of selected) {
      const miss = await check(operation);
      if (miss) misses.push(`${operation.method} ${operation.path}: ${miss}`);
    }
    expect(misses).toEqual([]);
  }

  it("covers the groups of the document", () => {
    const groups = new Set(operations.map((operation) => operation.group));
    expect([...groups].sort()).toEqual(["cdn", "cloud", "livestream", "media"]);
    expect(operations.length).toBeGreaterThan(100);
  });

  it("answers 401 in the group's shape when no key is sent", async () => {
    await everyOperation(
      () => true,
      async (operation) => {
        const response = await call(operation, {});
        const expected = missingCredentialBody(operation.group);
        if (response.status !== 401 || JSON.stringify(response.body) !== JSON.stringify(expected))
          return `${response.status} ${response.text}`;
      },
    );
  });

  it("answers 401 when a valid key comes in another group's header", async () => {
    await everyOperation(
      () => true,
      async (operation) => {
        const response = await call(operation, wrongHeader(operation.group, t.adminKey));
        const expected = missingCredentialBody(operation.group);
        if (response.status !== 401 || JSON.stringify(response.body) !== JSON.stringify(expected))
          return `${response.status} ${response.text}`;
      },
    );
  });

  it("answers 401 to a revoked key", async () => {
    await everyOperation(
      () => true,
      async (operation) => {
        const response = await call(operation, rightHeader(operation.group, revokedKey));
        if (response.status !== 401 || !isGroupError(operation.group, response.body, "unauthorized"))
          return `${response.status} ${response.text}`;
      },
    );
  });

  it("answers 403 to a read-only key on every write", async () => {
    await everyOperation(isWrite, async (operation) => {
      const response = await call(operation, rightHeader(operation.group, readOnlyKey), ours);
      if (response.status !== 403 || !isGroupError(operation.group, response.body, "forbidden"))
        return `${response.status} ${response.text}`;
    });
  });

  it("lets the owner read each resource it addresses", async () => {
    await everyOperation(
      (operation) => addressesResource(operation) && !isWrite(operation),
      async (operation) => {
        const response = await call(operation, rightHeader(operation.group, t.adminKey));
        if (response.status !== 200) return `${response.status} ${response.text}`;
      },
    );
  });

  it("lets a console session (the cookie alone) read each resource it addresses", async () => {
    await everyOperation(
      (operation) => addressesResource(operation) && !isWrite(operation),
      async (operation) => {
        const response = await call(operation, { cookie: readerSession.cookie });
        if (response.status !== 200) return `${response.status} ${response.text}`;
      },
    );
  });

  it("answers 403 csrf_token_invalid to a session's write without its X-CSRF-Token or with another", async () => {
    await everyOperation(isWrite, async (operation) => {
      for (const csrf of [undefined, readerSession.csrf]) {
        const response = await call(
          operation,
          { cookie: adminSession.cookie, ...(csrf ? { "x-csrf-token": csrf } : {}) },
          ours,
        );
        const expectedCode = operation.group === "cloud" ? undefined : "csrf_token_invalid";
        if (
          response.status !== 403 ||
          !isGroupError(operation.group, response.body, "forbidden") ||
          response.body.code !== expectedCode
        )
          return `${csrf ? "wrong" : "no"} token: ${response.status} ${response.text}`;
      }
    });
  });

  it("answers 403 to a read-only user's session on every write but a playback token", async () => {
    // Watching is reading: a read-only person may get a playback token (docs/console.md).
    const watching = (operation: MatrixOperation) =>
      operation.method === "POST" && operation.path.endsWith("/playback-token");
    const session = { cookie: readerSession.cookie, "x-csrf-token": readerSession.csrf };
    await everyOperation(
      (operation) => isWrite(operation) && !watching(operation),
      async (operation) => {
        const response = await call(operation, session, ours);
        if (response.status !== 403 || !isGroupError(operation.group, response.body, "forbidden"))
          return `${response.status} ${response.text}`;
      },
    );
    await everyOperation(watching, async (operation) => {
      const response = await call(operation, session, ours);
      if (response.status !== 201) return `${response.status} ${response.text}`;
    });
  });

  it("answers 404 to another organization on every operation naming a resource", async () => {
    await everyOperation(addressesResource, async (operation) => {
      const response = await call(
        operation,
        rightHeader(operation.group, otherKey),
        isWrite(operation) ? theirs : undefined,
      );
      if (response.status !== 404 || !isNotFound(operation.group, response.body))
        return `${response.status} ${response.text.slice(0, 200)}`;
    });
    // Nothing of the owner's changed: its resources still answer.
    expect(
      (await t.request("GET", `/v1/media/libraries/${ours.libraryId}/videos/${ours.videoId}`)).status,
    ).toBe(200);
    const library = await t.request("GET", `/v1/media/libraries/${ours.libraryId}`);
    expect(library.status).toBe(200);
  });

  it("shows another organization none of the owner's resources in its lists", async () => {
    const ids = Object.values(ours).filter(
      (value): value is string => typeof value === "string" && value.length > 8,
    );
    await everyOperation(
      (operation) => !addressesResource(operation) && !isWrite(operation),
      async (operation) => {
        const response = await call(operation, rightHeader(operation.group, otherKey));
        const shown = ids.filter((id) => response.text.includes(id));
        if (response.status !== 200 || shown.length > 0)
          return `${response.status}, shows ${shown.join(", ")}`;
      },
    );
  });
});
