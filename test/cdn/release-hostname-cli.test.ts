import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary, waitUntilActive } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { runCli } from "../support/cli.ts";
import { createDistribution, type DnsServer, startDnsServer, uniqueHost } from "./support.ts";

const ORIGIN_URL = "https://origin.example.com";

// Each case runs the real binary, each start compiling TypeScript: wider than the default bound.
describe("cumulo cdn release-hostname", { timeout: 180_000 }, () => {
  let t: TestApp;
  let dns: DnsServer;
  let env: Record<string, string | undefined>;
  let rival: { organizationId: string; key: string };

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await startTestApp({ CUMULO_CDN_HOSTNAME_VERIFICATION: "dns", CUMULO_DNS_SERVERS: dns.address });
    env = { CUMULO_DATA_DIR: t.store.dataDir, DATABASE_URL: t.store.databaseUrl };
    rival = await t.createOrganization("Name owner");
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  const createByRival = (hostname: string) =>
    t.request("POST", "/v1/cdn/distributions", {
      key: rival.key,
      json: { hostname, origin_url: ORIGIN_URL },
    });

  it("deletes a pending claim, whichever its organization, so another organization can create the name", async () => {
    const hostname = uniqueHost("squatted");
    const claim = await createDistribution(t, { hostname, origin_url: ORIGIN_URL });
    expect((await createByRival(hostname)).status).toBe(409);

    const released = await runCli(["cdn", "release-hostname", hostname.toUpperCase()], env);
    expect(released.code, released.stderr).toBe(0);
    expect(JSON.parse(released.stdout)).toEqual({
      hostname,
      distribution_id: claim.id,
      organization_id: expect.any(String),
      was: "pending",
      released: true,
    });
    expect((await t.request("GET", `/v1/cdn/distributions/${claim.id}`)).status).toBe(404);
    expect((await createByRival(hostname)).status).toBe(201);
  });

  it("refuses a verified name unless --force, and never releases a library's name", async () => {
    const hostname = uniqueHost("verified");
    const owned = await createDistribution(t, { hostname, origin_url: ORIGIN_URL });
    const token = (await t.request("GET", `/v1/cdn/distributions/${owned.id}`)).body.data
      .hostname_verification.record_value;
    dns.records.set(`_cumulo-challenge.${hostname}`, [[token]]);
    expect((await t.request("POST", `/v1/cdn/distributions/${owned.id}/hostname-verification`)).status).toBe(
      200,
    );

    const refused = await runCli(["cdn", "release-hostname", hostname], env);
    expect([refused.code, refused.stdout]).toEqual([1, ""]);
    expect(refused.stderr).toContain(`${hostname} is verified`);
    expect(refused.stderr).toContain("--force");
    expect((await t.request("GET", `/v1/cdn/distributions/${owned.id}`)).status).toBe(200);

    const forced = await runCli(["cdn", "release-hostname", hostname, "--force"], env);
    expect(forced.code, forced.stderr).toBe(0);
    expect(JSON.parse(forced.stdout)).toMatchObject({ hostname, distribution_id: owned.id, was: "verified" });
    expect((await t.request("GET", `/v1/cdn/distributions/${owned.id}`)).status).toBe(404);

    const library = await createLibrary(t);
    await waitUntilActive(t, library.id);
    const listed = await t.request("GET", "/v1/cdn/distributions?limit=100");
    const own = listed.body.data.find((row: { hostname: string }) => row.hostname.startsWith(library.id));
    const kept = await runCli(["cdn", "release-hostname", own.hostname, "--force"], env);
    expect(kept.code).toBe(1);
    expect(kept.stderr).toContain("media library's own name");
    expect((await t.request("GET", `/v1/cdn/distributions/${own.id}`)).status).toBe(200);
  });

  it("says so for a name no distribution has (1) and a malformed one (2)", async () => {
    const unknown = await runCli(["cdn", "release-hostname", uniqueHost("nobody")], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no distribution has the host name");
    const malformed = await runCli(["cdn", "release-hostname", "not a host"], env);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain("must be a host name");
  });
});
