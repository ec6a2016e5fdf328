import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";

// README: "a bad value stops start-up with one line naming it". These values used to start a server
// that failed later: with no region the API could not build its schemas (the error named HOST and
// PORT), with no location every VM creation was a 500, a malformed pool was refused without naming
// its variable, and retentions past the dates a store holds failed every housekeeping pass (and
// answered `Upload-Expires: Invalid Date`).
describe("configuration of lists, pools and retentions", () => {
  it("refuses a region or location list that names nothing, or an item twice", () => {
    expect(() => loadConfig({ CUMULO_REGIONS: "," })).toThrow(/CUMULO_REGIONS names no region/);
    expect(() => loadConfig({ CUMULO_REGIONS: "eu-central, eu-central" })).toThrow(
      /CUMULO_REGIONS names the region "eu-central" twice/,
    );
    expect(() => loadConfig({ CUMULO_LOCATIONS: " , " })).toThrow(/CUMULO_LOCATIONS names no location/);
    expect(() => loadConfig({ CUMULO_LOCATIONS: "a-1,a-1" })).toThrow(
      /CUMULO_LOCATIONS names the location "a-1" twice/,
    );
    expect(loadConfig({ CUMULO_REGIONS: "r1, r2" }).regions).toEqual(["r1", "r2"]);
  });

  it("names the variable of a pool that is not an IPv4 block from /8 to /30", () => {
    expect(() => loadConfig({ CUMULO_LOCATION_LOCAL_1_PUBLIC_POOL: "203.0.113.0/31" })).toThrow(
      /CUMULO_LOCATION_LOCAL_1_PUBLIC_POOL must be an IPv4 CIDR block from \/8 to \/30/,
    );
    expect(() => loadConfig({ CUMULO_LOCATION_LOCAL_1_PRIVATE_POOL: "10.0.0.0/7" })).toThrow(
      /CUMULO_LOCATION_LOCAL_1_PRIVATE_POOL must be an IPv4 CIDR block/,
    );
    expect(
      loadConfig({ CUMULO_LOCATION_LOCAL_1_PUBLIC_POOL: "198.18.0.0/30" }).locations[0]?.publicPool,
    ).toBe("198.18.0.0/30");
  });

  it("refuses retentions and an upload expiry longer than 100 years", () => {
    expect(() => loadConfig({ CUMULO_JOB_RETENTION_DAYS: "999999999" })).toThrow(
      /CUMULO_JOB_RETENTION_DAYS must be at most 36500/,
    );
    expect(() => loadConfig({ CUMULO_CDN_MINUTE_RETENTION_DAYS: "36501" })).toThrow(
      /CUMULO_CDN_MINUTE_RETENTION_DAYS must be at most 36500/,
    );
    expect(() => loadConfig({ CUMULO_UPLOAD_EXPIRY_S: "99999999999999" })).toThrow(
      /CUMULO_UPLOAD_EXPIRY_S must be at most 3153600000/,
    );
    const config = loadConfig({ CUMULO_JOB_RETENTION_DAYS: "36500", CUMULO_UPLOAD_EXPIRY_S: "3153600000" });
    expect(config.retention.doneJobsDays).toBe(36_500);
    expect(config.uploads.expiryMs).toBe(3_153_600_000_000);
  });
});
