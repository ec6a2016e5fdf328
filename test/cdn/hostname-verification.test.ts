import { randomUUID } from "node:crypto";
import { Migrator } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/database.ts";
import { allMigrations } from "../../src/store/migrations/index.ts";
import { createLibrary, waitUntilActive } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createTestStore } from "../support/store.ts";
import {
  createDistribution,
  type DnsServer,
  EDGE_ENV,
  edgeRequest,
  edgeUrlOf,
  insertDistributionRow,
  type Origin,
  startDnsServer,
  startOrigin,
  TestClock,
  uniqueHost,
} from "./support.ts";

const verifyPath = (id: string) => `/v1/cdn/distributions/${id}/hostname-verification`;
const HOUR_MS = 3_600_000;
const hoursAfter = (iso: string, hours: number) => new Date(Date.parse(iso) + hours * HOUR_MS).toISOString();

/** What a pending claim of `hostname` made at `createdAt` shows, with a token of its own, expiring `ttlHours` later. */
const pendingVerification = (hostname: string, createdAt: string, ttlHours: number) => ({
  status: "pending",
  record_type: "TXT",
  record_name: `_cumulo-challenge.${hostname}`,
  record_value: expect.stringMatching(/^cumulo-verify-[0-9a-f]{32}$/),
  expires_at: hoursAfter(createdAt, ttlHours),
});

describe("CDN host name verification (CUMULO_CDN_HOSTNAME_VERIFICATION=dns)", () => {
  let t: TestApp;
  let dns: DnsServer;
  let origin: Origin;
  const edge = () => edgeUrlOf(t);

  beforeAll(async () => {
    dns = await startDnsServer();
    origin = await startOrigin();
    origin.route("/hello", (_req, res) =>
      res.writeHead(200, { "content-type": "text/plain" }).end("origin says hi"),
    );
    t = await startTestApp({
      ...EDGE_ENV,
      CUMULO_CDN_HOSTNAME_VERIFICATION: "dns",
      CUMULO_DNS_SERVERS: dns.address,
    });
  });
  afterAll(async () => {
    await t?.close();
    await origin?.close();
    await dns?.close();
  });

  it("creates a distribution pending, served path-style but not under its host name", async () => {
    const hostname = uniqueHost("pending");
    const { id } = await createDistribution(t, { hostname, origin_url: origin.url });
    const one = await t.request("GET", `/v1/cdn/distributions/${id}`);
    expect(one.body.data.hostname_verification).toEqual(
      pendingVerification(hostname, one.body.data.created_at, 72),
    );
    const listed = await t.request("GET", "/v1/cdn/distributions?limit=100");
    expect(listed.body.data.find((row: { id: string }) => row.id === id).hostname_verification).toEqual(
      one.body.data.hostname_verification,
    );
    const another = await createDistribution(t, { hostname: uniqueHost("pending"), origin_url: origin.url });
    const anotherOne = await t.request("GET", `/v1/cdn/distributions/${another.id}`);
    expect(anotherOne.body.data.hostname_verification.record_value).not.toBe(
      one.body.data.hostname_verification.record_value,
    );

    const pathStyle = await edgeRequest(edge(), `/${hostname}/hello`);
    expect([pathStyle.status, pathStyle.text]).toEqual([200, "origin says hi"]);
    const hostStyle = await edgeRequest(edge(), "/hello", { host: hostname });
    const unknownHost = await edgeRequest(edge(), "/hello", { host: uniqueHost("nobody") });
    expect(unknownHost.status).toBe(404);
    expect([hostStyle.status, hostStyle.text]).toEqual([unknownHost.status, unknownHost.text]);
  });

  it("refuses to verify while the TXT record is missing or holds other values, naming the record", async () => {
    const hostname = uniqueHost("wrong");
    const { id } = await createDistribution(t, { hostname, origin_url: origin.url });
    const { record_value } = (await t.request("GET", `/v1/cdn/distributions/${id}`)).body.data
      .hostname_verification;

    const missing = await t.request("POST", verifyPath(id));
    expect(missing.status).toBe(409);
    expect(missing.body).toEqual({ success: false, message: expect.any(String) });
    expect(missing.body.message).toContain(`TXT record _cumulo-challenge.${hostname}`);
    expect(missing.body.message).toContain(record_value);

    dns.records.set(`_cumulo-challenge.${hostname}`, [["cumulo-verify-someone-elses-token"]]);
    const wrong = await t.request("POST", verifyPath(id));
    expect(wrong.status).toBe(409);
    expect(wrong.body.message).toContain(`_cumulo-challenge.${hostname}`);
    expect(wrong.body.message).toContain("other values");

    const still = await t.request("GET", `/v1/cdn/distributions/${id}`);
    expect(still.body.data.hostname_verification.status).toBe("pending");
    expect((await edgeRequest(edge(), "/hello", { host: hostname })).status).toBe(404);
  });

  it("answers 502 when DNS gives no answer (SERVFAIL), naming the record; the distribution stays pending", async () => {
    const hostname = uniqueHost("servfail");
    const { id } = await createDistribution(t, { hostname, origin_url: origin.url });
    dns.failing.add(`_cumulo-challenge.${hostname}`);
    const failed = await t.request("POST", verifyPath(id));
    expect([failed.status, failed.body]).toEqual([
      502,
      {
        success: false,
        message: `Host name not verified: the DNS lookup of the TXT record _cumulo-challenge.${hostname} failed (ESERVFAIL); try again later`,
      },
    ]);
    expect(failed.text).not.toContain("127.0.0.1");
    const still = await t.request("GET", `/v1/cdn/distributions/${id}`);
    expect(still.body.data.hostname_verification.status).toBe("pending");

    dns.failing.delete(`_cumulo-challenge.${hostname}`);
    const missing = await t.request("POST", verifyPath(id));
    expect(missing.status).toBe(409);
  });

  it("verifies with the right TXT value; every edge then serves the host name", async () => {
    const hostname = uniqueHost("right");
    const { id } = await createDistribution(t, { hostname, origin_url: origin.url });
    const created = (await t.request("GET", `/v1/cdn/distributions/${id}`)).body.data;
    const token: string = created.hostname_verification.record_value;
    // The edge has read the name as pending; the verification must reach it.
    expect((await edgeRequest(edge(), "/hello", { host: hostname })).status).toBe(404);

    // Other values beside it, and the token split into two strings as DNS may carry a long value.
    dns.records.set(`_cumulo-challenge.${hostname}`, [
      ["google-site-verification=abc"],
      [token.slice(0, 10), token.slice(10)],
    ]);
    const verified = await t.request("POST", verifyPath(id));
    expect(verified.status, verified.text).toBe(200);
    const { expires_at: _, ...pending } = created.hostname_verification;
    expect(verified.body.data.hostname_verification).toEqual({ ...pending, status: "verified" });
    expect(verified.body.data).toMatchObject({ id, hostname, status: "active" });

    const hostStyle = await edgeRequest(edge(), "/hello", { host: hostname });
    expect([hostStyle.status, hostStyle.text]).toEqual([200, "origin says hi"]);
    expect(
      (await t.request("GET", `/v1/cdn/distributions/${id}`)).body.data.hostname_verification.status,
    ).toBe("verified");

    // Verified stays verified, also once the record is gone.
    dns.records.delete(`_cumulo-challenge.${hostname}`);
    const again = await t.request("POST", verifyPath(id));
    expect([again.status, again.body.data.hostname_verification.status]).toEqual([200, "verified"]);
  });

  it("answers 404 to another organization, and 403 to a read-only key", async () => {
    const hostname = uniqueHost("theirs");
    const { id } = await createDistribution(t, { hostname, origin_url: origin.url });
    const token = (await t.request("GET", `/v1/cdn/distributions/${id}`)).body.data.hostname_verification
      .record_value;
    dns.records.set(`_cumulo-challenge.${hostname}`, [[token]]);

    const other = await t.createOrganization("Verification rival");
    const fromOther = await t.request("POST", verifyPath(id), { key: other.key });
    expect([fromOther.status, fromOther.body]).toEqual([
      404,
      { success: false, message: "Resource not found" },
    ]);

    const identity = t.cumulo.services.identity;
    const organizationId = (await identity.authenticate(t.adminKey))?.organizationId ?? "";
    const reader = await identity.createApiKey(organizationId, { name: "reader", readOnly: true });
    if (reader.outcome !== "created") throw new Error("read-only key not created");
    const fromReader = await t.request("POST", verifyPath(id), { key: reader.api_key });
    expect(fromReader.status).toBe(403);

    const still = await t.request("GET", `/v1/cdn/distributions/${id}`);
    expect(still.body.data.hostname_verification.status).toBe("pending");
    expect((await edgeRequest(edge(), "/hello", { host: hostname })).status).toBe(404);
  });

  it("serves a distribution an older version wrote during an upgrade (no token) as before", async () => {
    const hostname = uniqueHost("older");
    // As a node of the version before 0706 inserts it into the migrated store: no new columns.
    const id = await insertDistributionRow(t, { hostname, origin_url: origin.url });
    expect((await t.request("GET", `/v1/cdn/distributions/${id}`)).body.data).not.toHaveProperty(
      "hostname_verification",
    );
    const hostStyle = await edgeRequest(edge(), "/hello", { host: hostname });
    expect([hostStyle.status, hostStyle.text]).toEqual([200, "origin says hi"]);
  });

  describe("taking a name over from another organization's pending claim", () => {
    const HOSTNAME_TAKEN = "A distribution with this hostname already exists";
    const CLAIM_TOKEN = /TXT record _cumulo-challenge\.\S+ with the value (cumulo-verify-[0-9a-f]{32}) /;
    let rival: { organizationId: string; key: string };
    beforeAll(async () => {
      origin.route("/a/hello", (_req, res) => res.writeHead(200).end("claimant's content"));
      origin.route("/b/hello", (_req, res) => res.writeHead(200).end("owner's content"));
      rival = await t.createOrganization("Name owner");
    });

    /** The admin organization claims the name (pending); the rival organization is its real owner. */
    const claimByAdmin = (hostname: string) =>
      createDistribution(t, { hostname, origin_url: `${origin.url}/a` });
    const createByRival = (hostname: string) =>
      t.request("POST", "/v1/cdn/distributions", {
        key: rival.key,
        json: { hostname, origin_url: `${origin.url}/b` },
      });
    const rivalClaimToken = async (hostname: string): Promise<string> => {
      const refused = await createByRival(hostname);
      expect(refused.status).toBe(409);
      const token = CLAIM_TOKEN.exec(refused.body.message)?.[1];
      if (!token) throw new Error(`no claim token in ${refused.text}`);
      return token;
    };

    it("tells the owner which TXT record to publish, then gives it the name verified and removes the claim", async () => {
      const hostname = uniqueHost("takeover");
      const claim = await claimByAdmin(hostname);

      const refused = await createByRival(hostname);
      expect(refused.status).toBe(409);
      expect(refused.body).toEqual({ success: false, message: expect.any(String) });
      expect(refused.body.message).toMatch(CLAIM_TOKEN);
      expect(refused.body.message).toContain(`TXT record _cumulo-challenge.${hostname} with the value`);
      expect(refused.body.message).toContain("create the distribution again");
      expect(refused.body.message).toContain("DNS has no such record");
      const claimShown = (await t.request("GET", `/v1/cdn/distributions/${claim.id}`)).body.data;
      expect(refused.body.message).toContain(
        `(or create it again after ${claimShown.hostname_verification.expires_at}, when the claim expires)`,
      );
      const token = await rivalClaimToken(hostname);
      // The same token each time (nothing stored), and the rival's own: another organization gets another.
      expect(CLAIM_TOKEN.exec(refused.body.message)?.[1]).toBe(token);
      const third = await t.createOrganization("Third");
      const thirdRefused = await t.request("POST", "/v1/cdn/distributions", {
        key: third.key,
        json: { hostname, origin_url: origin.url },
      });
      expect(thirdRefused.status).toBe(409);
      expect(CLAIM_TOKEN.exec(thirdRefused.body.message)?.[1]).not.toBe(token);

      dns.records.set(`_cumulo-challenge.${hostname}`, [["v=spf1 -all"], [token]]);
      const created = await createByRival(hostname);
      expect(created.status, created.text).toBe(201);
      expect(created.body.data).toMatchObject({ hostname, origin_url: `${origin.url}/b`, status: "active" });
      expect(created.body.data.hostname_verification).toEqual({
        status: "verified",
        record_type: "TXT",
        record_name: `_cumulo-challenge.${hostname}`,
        record_value: token,
      });
      const own = await t.request("GET", `/v1/cdn/distributions/${created.body.data.id}`, { key: rival.key });
      expect(own.body.data.hostname_verification.status).toBe("verified");

      // The claimant finds its distribution gone, and the name now the owner's.
      expect((await t.request("GET", `/v1/cdn/distributions/${claim.id}`)).status).toBe(404);
      const listed = await t.request("GET", "/v1/cdn/distributions?limit=100");
      expect(listed.body.data.map((row: { id: string }) => row.id)).not.toContain(claim.id);
      const again = await t.request("POST", "/v1/cdn/distributions", {
        json: { hostname, origin_url: `${origin.url}/a` },
      });
      expect([again.status, again.body.message]).toEqual([409, HOSTNAME_TAKEN]);

      const hostStyle = await edgeRequest(edge(), "/hello", { host: hostname });
      expect([hostStyle.status, hostStyle.text]).toEqual([200, "owner's content"]);
      const pathStyle = await edgeRequest(edge(), `/${hostname}/hello`);
      expect([pathStyle.status, pathStyle.text]).toEqual([200, "owner's content"]);
    });

    it("keeps the claim while the owner's record is missing or holds other values (the claimant's token too)", async () => {
      const hostname = uniqueHost("kept");
      const claim = await claimByAdmin(hostname);
      const claimToken = (await t.request("GET", `/v1/cdn/distributions/${claim.id}`)).body.data
        .hostname_verification.record_value;
      const token = await rivalClaimToken(hostname);

      dns.records.set(`_cumulo-challenge.${hostname}`, [[claimToken], [`${token}0`]]);
      const wrong = await createByRival(hostname);
      expect(wrong.status).toBe(409);
      expect(wrong.body.message).toContain(
        `TXT record _cumulo-challenge.${hostname} with the value ${token}`,
      );
      expect(wrong.body.message).toContain("the record holds other values");

      const kept = await t.request("GET", `/v1/cdn/distributions/${claim.id}`);
      expect(kept.status).toBe(200);
      expect(kept.body.data.hostname_verification.status).toBe("pending");
      const pathStyle = await edgeRequest(edge(), `/${hostname}/hello`);
      expect([pathStyle.status, pathStyle.text]).toEqual([200, "claimant's content"]);
      const rivals = await t.request("GET", "/v1/cdn/distributions?limit=100", { key: rival.key });
      expect(rivals.body.data.map((row: { hostname: string }) => row.hostname)).not.toContain(hostname);
    });

    it("answers 502 when DNS gives no answer for the owner's record, keeping the claim", async () => {
      const hostname = uniqueHost("claimfail");
      const claim = await claimByAdmin(hostname);
      const token = await rivalClaimToken(hostname);
      dns.failing.add(`_cumulo-challenge.${hostname}`);
      const failed = await createByRival(hostname);
      expect([failed.status, failed.body]).toEqual([
        502,
        {
          success: false,
          message: `${HOSTNAME_TAKEN}, but its organization has not verified the name. To take the name over, publish a TXT record _cumulo-challenge.${hostname} with the value ${token} and create the distribution again; the DNS lookup of that record failed (ESERVFAIL), try again later`,
        },
      ]);
      const kept = await t.request("GET", `/v1/cdn/distributions/${claim.id}`);
      expect(kept.body.data.hostname_verification.status).toBe("pending");
      dns.failing.delete(`_cumulo-challenge.${hostname}`);
    });

    it("never takes over a verified name, even with the owner's claim token in DNS, nor the organization's own", async () => {
      const hostname = uniqueHost("held");
      const claim = await claimByAdmin(hostname);
      const token = await rivalClaimToken(hostname);
      const claimToken = (await t.request("GET", `/v1/cdn/distributions/${claim.id}`)).body.data
        .hostname_verification.record_value;
      dns.records.set(`_cumulo-challenge.${hostname}`, [[claimToken]]);
      expect((await t.request("POST", verifyPath(claim.id))).status).toBe(200);

      dns.records.set(`_cumulo-challenge.${hostname}`, [[claimToken], [token]]);
      const refused = await createByRival(hostname);
      expect([refused.status, refused.body]).toEqual([409, { success: false, message: HOSTNAME_TAKEN }]);
      const kept = await t.request("GET", `/v1/cdn/distributions/${claim.id}`);
      expect(kept.body.data.hostname_verification.status).toBe("verified");
      const hostStyle = await edgeRequest(edge(), "/hello", { host: hostname });
      expect([hostStyle.status, hostStyle.text]).toEqual([200, "claimant's content"]);

      const pending = uniqueHost("own");
      await claimByAdmin(pending);
      const duplicate = await t.request("POST", "/v1/cdn/distributions", {
        json: { hostname: pending, origin_url: origin.url },
      });
      expect([duplicate.status, duplicate.body]).toEqual([409, { success: false, message: HOSTNAME_TAKEN }]);
    });
  });

  it("leaves a library's distribution out: its name is the platform's own", async () => {
    const library = await createLibrary(t);
    await waitUntilActive(t, library.id);
    const listed = await t.request("GET", "/v1/cdn/distributions?limit=100");
    const own = listed.body.data.find((row: { hostname: string }) => row.hostname.startsWith(library.id));
    expect(own).toBeDefined();
    expect(own).not.toHaveProperty("hostname_verification");
    const verify = await t.request("POST", verifyPath(own.id));
    expect(verify.status).toBe(409);
    expect(verify.body.message).toContain("needs no verification");
  });
});

describe("pending claims expire (CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS)", () => {
  const HOSTNAME_TAKEN = "A distribution with this hostname already exists";
  const clock = new TestClock();
  let t: TestApp;
  let dns: DnsServer;
  let origin: Origin;
  let rival: { organizationId: string; key: string };

  beforeAll(async () => {
    dns = await startDnsServer();
    origin = await startOrigin();
    origin.route("/a/hello", (_req, res) => res.writeHead(200).end("claimant's content"));
    origin.route("/b/hello", (_req, res) => res.writeHead(200).end("newcomer's content"));
    t = await startTestApp(
      {
        ...EDGE_ENV,
        CUMULO_CDN_HOSTNAME_VERIFICATION: "dns",
        CUMULO_DNS_SERVERS: dns.address,
        CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS: "2",
      },
      { clock },
    );
    rival = await t.createOrganization("Newcomer");
  });
  afterAll(async () => {
    await t?.close();
    await origin?.close();
    await dns?.close();
  });

  const createByRival = (hostname: string) =>
    t.request("POST", "/v1/cdn/distributions", {
      key: rival.key,
      json: { hostname, origin_url: `${origin.url}/b` },
    });

  it("frees an expired pending claim for another organization's create, which deletes it", async () => {
    const hostname = uniqueHost("expired");
    const claim = await createDistribution(t, { hostname, origin_url: `${origin.url}/a` });
    const shown = (await t.request("GET", `/v1/cdn/distributions/${claim.id}`)).body.data;
    expect(shown.hostname_verification.expires_at).toBe(hoursAfter(shown.created_at, 2));

    clock.advance(2 * HOUR_MS - 60_000);
    const early = await createByRival(hostname);
    expect(early.status).toBe(409);
    expect(early.body.message).toContain(`create it again after ${shown.hostname_verification.expires_at}`);

    clock.advance(60_000);
    const created = await createByRival(hostname);
    expect(created.status, created.text).toBe(201);
    // No proof was given: the newcomer's distribution is a pending claim of its own, with its own token.
    expect(created.body.data.hostname_verification).toEqual(
      pendingVerification(hostname, created.body.data.created_at, 2),
    );
    expect(created.body.data.hostname_verification.record_value).not.toBe(
      shown.hostname_verification.record_value,
    );

    // The claimant's distribution is gone, as after a takeover.
    expect((await t.request("GET", `/v1/cdn/distributions/${claim.id}`)).status).toBe(404);
    const pathStyle = await edgeRequest(edgeUrlOf(t), `/${hostname}/hello`);
    expect([pathStyle.status, pathStyle.text]).toEqual([200, "newcomer's content"]);
    const again = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname, origin_url: `${origin.url}/a` },
    });
    expect(again.status).toBe(409);
  });

  it("never expires a verified name, nor frees an expired claim for its own organization", async () => {
    const verifiedName = uniqueHost("kept");
    const verified = await createDistribution(t, { hostname: verifiedName, origin_url: origin.url });
    const token = (await t.request("GET", `/v1/cdn/distributions/${verified.id}`)).body.data
      .hostname_verification.record_value;
    dns.records.set(`_cumulo-challenge.${verifiedName}`, [[token]]);
    const done = await t.request("POST", verifyPath(verified.id));
    expect(done.body.data.hostname_verification).not.toHaveProperty("expires_at");
    const pendingName = uniqueHost("own");
    await createDistribution(t, { hostname: pendingName, origin_url: origin.url });

    clock.advance(3 * HOUR_MS);
    const refused = await createByRival(verifiedName);
    expect([refused.status, refused.body]).toEqual([409, { success: false, message: HOSTNAME_TAKEN }]);
    const duplicate = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: pendingName, origin_url: origin.url },
    });
    expect([duplicate.status, duplicate.body]).toEqual([409, { success: false, message: HOSTNAME_TAKEN }]);
  });

  it("lets the claimant verify an expired claim no one has taken", async () => {
    const hostname = uniqueHost("late");
    const claim = await createDistribution(t, { hostname, origin_url: origin.url });
    const token = (await t.request("GET", `/v1/cdn/distributions/${claim.id}`)).body.data
      .hostname_verification.record_value;
    clock.advance(3 * HOUR_MS);
    dns.records.set(`_cumulo-challenge.${hostname}`, [[token]]);
    const verified = await t.request("POST", verifyPath(claim.id));
    expect([verified.status, verified.body.data.hostname_verification.status]).toEqual([200, "verified"]);
    expect((await createByRival(hostname)).status).toBe(409);
  });
});

describe("migration 0706-cdn-hostname-verification", () => {
  it("records the distributions made before it as verified, each with a token of its own", async () => {
    const testStore = await createTestStore();
    const store = openStore({ dataDir: testStore.dataDir, databaseUrl: testStore.databaseUrl });
    try {
      const migrations = Object.entries(allMigrations(store.dialect)).filter(
        ([name]) => name < "0706-cdn-hostname-verification",
      );
      const migrator = new Migrator({
        db: store.db,
        provider: { getMigrations: async () => Object.fromEntries(migrations) },
        allowUnorderedMigrations: true,
      });
      expect((await migrator.migrateToLatest()).error).toBeUndefined();
      const now = new Date().toISOString();
      const organizationId = randomUUID();
      await store.db
        .insertInto("organizations")
        .values({ id: organizationId, name: "Before", created_at: now, updated_at: now })
        .execute();
      const libraryId = randomUUID();
      const rows = [
        { hostname: "one.example.test", library_id: null },
        { hostname: "two.example.test", library_id: null },
        { hostname: `${libraryId}.media.cumulo.local`, library_id: libraryId },
      ];
      for (const row of rows) {
        await store.db
          .insertInto("cdn_distributions")
          .values({
            ...row,
            id: randomUUID(),
            organization_id: organizationId,
            origin_url: "https://origin.example.com",
            default_ttl_s: 3600,
            status: "active",
            created_at: now,
            updated_at: now,
          } as never)
          .execute();
      }

      expect(await store.migrate()).toContain("0706-cdn-hostname-verification");
      const after = await store.db
        .selectFrom("cdn_distributions")
        .select(["hostname", "hostname_token", "hostname_verified_at", "created_at"])
        .orderBy("hostname")
        .execute();
      const customers = after.filter((row) => row.hostname.endsWith(".example.test"));
      expect(customers.map((row) => row.hostname_verified_at)).toEqual(
        customers.map((row) => row.created_at),
      );
      expect(customers.every((row) => /^cumulo-verify-[0-9a-f]{32}$/.test(row.hostname_token ?? ""))).toBe(
        true,
      );
      expect(customers[0]?.hostname_token).not.toBe(customers[1]?.hostname_token);
      const library = after.find((row) => row.hostname.startsWith(libraryId));
      expect(library).toMatchObject({ hostname_token: null, hostname_verified_at: null });
    } finally {
      await store.close();
      await testStore.drop();
    }
  });
});
