import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import {
  addressesResource,
  authenticatedOperations,
  createTenantResources,
  exampleBody,
  isWrite,
  type MatrixOperation,
  rightHeader,
  type TenantResources,
  urlOf,
} from "../support/auth-matrix.ts";

/** Body and query fields that point at another resource: those named after it, and aliases of it. */
const ALIASES: Record<string, string> = {
  parent_id: "folderId",
  folder_id: "folderId",
  folder_ids: "folderId",
  vm_uuid: "uuid",
  assigned_to: "uuid",
  set_id: "billing_account_id",
};
const REFERENCES = new Set([
  ...Object.keys(ALIASES),
  "uuid",
  "target_uuid",
  "storage_uuid",
  "token_id",
  "access_key",
  "billing_account_id",
  "distribution",
]);

/** A value of the same shape as `value` that names nothing. */
function unknownLike(value: string | number): string | number {
  const text = String(value);
  if (typeof value === "number" || /^\d+$/.test(text)) return 2_000_000_000;
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-/.test(text)) return randomUUID();
  if (/^[0-9a-f]{32}$/.test(text)) return randomBytes(16).toString("hex");
  if (/^\d+\.\d+\.\d+\.\d+$/.test(text)) return "203.0.113.254";
  if (text.includes(".")) return `unknown-${randomBytes(4).toString("hex")}.example.com`;
  return randomBytes(text.length).toString("hex").toUpperCase().slice(0, text.length);
}

/**
 * Another organization's resource named anywhere in a request that is otherwise the caller's own (under
 * the caller's library or video, in a body or query field that refers to a resource) is answered
 * exactly as an id that names nothing, and changes nothing of its owner's: no 2xx that reaches it, no
 * answer that tells it exists (CONTRACT.md section 3). The matrix (auth-matrix.test.ts) covers requests
 * made wholly of the owner's ids; this covers the mixed ones, one position at a time.
 */
describe("another organization's ids inside the caller's own requests", () => {
  let t: TestApp;
  let operations: MatrixOperation[];
  let owner: TenantResources;
  let caller: TenantResources;
  let callerKey: string;

  /** A library's distribution name in the matrix resources (test/support/auth-matrix.ts). */
  const hostnameOf = (resources: TenantResources) =>
    `matrix-${String(resources.libraryId).slice(0, 8)}.example.com`;

  beforeAll(async () => {
    t = await startTestApp({ CUMULO_RATE_LIMIT: "1000000/1m" });
    operations = await authenticatedOperations(t);
    const rival = await t.createOrganization("Reference rival");
    callerKey = rival.key;
    const ownerAccounts = await t.cloud("GET", "/v1/payment/billing_account/list");
    owner = await createTenantResources(t, t.adminKey);
    owner.billing_account_id = ownerAccounts.body[0].id;
    caller = await createTenantResources(t, callerKey);
    caller.billing_account_id = rival.billingAccountId;
    for (const resources of [owner, caller]) {
      resources.distribution = hostnameOf(resources);
      for (const [alias, name] of Object.entries(ALIASES)) resources[alias] = resources[name];
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The request with `resources` in every position, reference fields of the body and query included. */
  function requestOf(operation: MatrixOperation, resources: TenantResources) {
    const url = new URL(urlOf(operation, resources), "http://x");
    for (const parameter of operation.parameters) {
      if (parameter.in === "query" && REFERENCES.has(parameter.name))
        url.searchParams.set(parameter.name, String(resources[parameter.name]));
    }
    const example = exampleBody(operation, resources);
    let body: string | undefined;
    if (example !== undefined) {
      const fields = JSON.parse(example);
      for (const name of Object.keys(operation.bodySchema?.properties ?? {})) {
        if (!REFERENCES.has(name)) continue;
        const value = resources[name];
        fields[name] = name === "folder_ids" ? [value] : value;
      }
      body = JSON.stringify(fields);
    }
    return { url: url.pathname + url.search, body };
  }

  async function send(operation: MatrixOperation, resources: TenantResources) {
    const { url, body } = requestOf(operation, resources);
    const response = await fetch(t.baseUrl + url, {
      method: operation.method,
      headers: {
        ...rightHeader(operation.group, callerKey),
        ...(operation.path.startsWith("/v1/media/tus") ? { "tus-resumable": "1.0.0" } : {}),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body,
    });
    return { url, status: response.status, text: await response.text() };
  }

  /** The positions of an operation that name a resource: path parameters and reference fields. */
  function positionsOf(operation: MatrixOperation): string[] {
    const path = operation.parameters
      .filter((p) => p.in === "path" && p.name !== "location")
      .map((p) => p.name);
    const query = operation.parameters
      .filter((p) => p.in === "query" && REFERENCES.has(p.name))
      .map((p) => p.name);
    const body = Object.keys(operation.bodySchema?.properties ?? {}).filter((name) => REFERENCES.has(name));
    return [...new Set([...path, ...query, ...body])];
  }

  /** The ids each of the owner's lists and resources shows it, to see that nothing of its changed. */
  async function ownerState(): Promise<string[]> {
    const state: string[] = [];
    // Deliveries are left out: the owner's own import (of a host that never resolves) fails while the
    // test runs and notifies its endpoint.
    const reads = operations.filter(
      (o) => !isWrite(o) && !o.path.startsWith("/v1/media/tus") && !o.path.endsWith("/events"),
    );
    for (const operation of reads) {
      const response = await fetch(t.baseUrl + urlOf(operation, owner), {
        headers: rightHeader(operation.group, t.adminKey),
      });
      const ids = (await response.text()).match(
        /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g,
      );
      state.push(`${operation.path} ${response.status} ${[...new Set(ids)].sort().join(",")}`);
    }
    return state;
  }

  it("answers every position holding the owner's id as it answers an id that names nothing", async () => {
    const before = await ownerState();
    // Deletes last, so that a delete that wrongly succeeded cannot hide what the others would do.
    const ordered = [...operations.filter(addressesResource)].sort(
      (a, b) => Number(a.method === "DELETE") - Number(b.method === "DELETE"),
    );
    const misses: string[] = [];
    let probes = 0;
    for (const operation of ordered) {
      for (const position of positionsOf(operation)) {
        const ownerValue = owner[position];
        const unknownValue = unknownLike(ownerValue);
        const reference = (value: string | number) => ({ ...caller, [position]: value });
        const theirs = await send(operation, reference(ownerValue));
        const nothing = await send(operation, reference(unknownValue));
        probes++;
        const shape = (text: string, value: string | number) =>
          text.replaceAll(String(value), "<id>").replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, "<time>");
        if (
          theirs.status >= 500 ||
          theirs.status !== nothing.status ||
          shape(theirs.text, ownerValue) !== shape(nothing.text, unknownValue)
        ) {
          misses.push(
            `${operation.method} ${theirs.url} [${position}]: ${theirs.status} ${theirs.text.slice(0, 160)} / ` +
              `unknown: ${nothing.status} ${nothing.text.slice(0, 160)}`,
          );
        }
      }
    }
    expect(misses).toEqual([]);
    expect(probes).toBeGreaterThan(200);
    expect(await ownerState()).toEqual(before);
  });
});
