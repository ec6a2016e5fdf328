import { randomBytes } from "node:crypto";
import { Resolver } from "node:dns/promises";
import type { Config } from "../config.ts";
import type { HostnameVerification } from "./schemas.ts";
import type { DistributionRow } from "./tables.ts";

/** The label under a distribution's host name whose TXT record proves the organization controls it. */
const CHALLENGE_LABEL = "_cumulo-challenge";

/**
 * A distribution's own TXT value: random, so a record left behind in a former customer's DNS never
 * verifies a later claim of the same name by someone else.
 */
export const newHostnameToken = (): string => `cumulo-verify-${randomBytes(16).toString("hex")}`;

export const challengeRecordName = (hostname: string): string => `${CHALLENGE_LABEL}.${hostname}`;

/**
 * Whether the edge serves a distribution under its host name (host-style): always, unless the platform
 * verifies names; then only a verified name, or one with nothing to verify (no token: a library's own
 * name, or a row an older version wrote). Path-style serves it either way.
 */
export const servedUnderHostname = (
  row: DistributionRow,
  config: Pick<Config, "cdnHostnameVerification">,
): boolean =>
  config.cdnHostnameVerification === "off" ||
  row.hostname_token === null ||
  row.hostname_verified_at !== null;

/**
 * What a distribution shows of its verification when the platform verifies names; nothing for one
 * without a token (a library's distribution, whose name is the platform's).
 */
export function hostnameVerificationOf(
  row: DistributionRow,
  config: Pick<Config, "cdnHostnameVerification">,
): HostnameVerification | undefined {
  if (config.cdnHostnameVerification !== "dns" || row.hostname_token === null) return undefined;
  return {
    status: row.hostname_verified_at === null ? "pending" : "verified",
    record_type: "TXT",
    record_name: challengeRecordName(row.hostname),
    record_value: row.hostname_token,
  };
}

// A lookup answers within seconds even when the servers do not (an API request waits for it).
const LOOKUP_TIMEOUT_MS = 2000;
const LOOKUP_TRIES = 2;

export type ChallengeLookup = { outcome: "found" } | { outcome: "missing"; reason: string };

/** Looks the distribution's TXT record up and says whether one of its values is the token. */
export async function lookUpChallenge(
  challenge: { hostname: string; token: string },
  config: Pick<Config, "dnsServers">,
): Promise<ChallengeLookup> {
  const resolver = new Resolver({ timeout: LOOKUP_TIMEOUT_MS, tries: LOOKUP_TRIES });
  if (config.dnsServers) resolver.setServers(config.dnsServers);
  let records: string[][];
  try {
    records = await resolver.resolveTxt(challengeRecordName(challenge.hostname));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const absent = code === "ENODATA" || code === "ENOTFOUND";
    return {
      outcome: "missing",
      reason: absent ? "DNS has no such record" : `the DNS lookup failed (${code})`,
    };
  }
  // A long TXT value comes as several strings; the value is their concatenation (RFC 7208, 3.3).
  const values = records.map((strings) => strings.join(""));
  if (values.includes(challenge.token)) return { outcome: "found" };
  return {
    outcome: "missing",
    reason: values.length === 0 ? "DNS has no such record" : "the record holds other values",
  };
}
