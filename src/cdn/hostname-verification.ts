import { createHmac, randomBytes } from "node:crypto";
import { Resolver } from "node:dns/promises";
import { laterBy } from "../clock.ts";
import type { Config } from "../config.ts";
import type { HostnameVerification } from "./schemas.ts";
import type { DistributionRow } from "./tables.ts";

/** The label under a distribution's host name whose TXT record proves the organization controls it. */
const CHALLENGE_LABEL = "_cumulo-challenge";

const TOKEN_PREFIX = "cumulo-verify-";
const TOKEN_BYTES = 16;

/**
 * A distribution's own TXT value: random, so a record left behind in a former customer's DNS never
 * verifies a later claim of the same name by someone else.
 */
export const newHostnameToken = (): string => `${TOKEN_PREFIX}${randomBytes(TOKEN_BYTES).toString("hex")}`;

/**
 * The TXT value with which an organization takes over a name another organization claims but never
 * verified: HMAC-SHA256 of (organization, host name) under a key derived from Cumulo's secret key
 * (CUMULO_SECRET_KEY, else the key file in the data dir). Deterministic, so the 409 that names it and
 * the create that checks it agree without a stored row; bound to the organization, so no other
 * organization's record (nor the claimant's own distribution token) matches it.
 */
export class HostnameClaimTokens {
  #key: Buffer | undefined;

  constructor(private readonly loadSecret: () => Buffer) {}

  tokenFor(organizationId: string, hostname: string): string {
    this.#key ??= createHmac("sha256", this.loadSecret()).update("cumulo-hostname-claims").digest();
    const mac = createHmac("sha256", this.#key).update(`${organizationId}:${hostname.toLowerCase()}`);
    return `${TOKEN_PREFIX}${mac.digest().subarray(0, TOKEN_BYTES).toString("hex")}`;
  }
}

export const challengeRecordName = (hostname: string): string => `${CHALLENGE_LABEL}.${hostname}`;

/**
 * A customer's claim of its host name not verified yet. A name with nothing to verify (no token: a
 * library's own name, or a row an older version wrote) is never one.
 */
export const isPendingClaim = (row: DistributionRow): boolean =>
  row.hostname_token !== null && row.hostname_verified_at === null;

/**
 * Whether the edge serves a distribution under its host name (host-style): always, unless the platform
 * verifies names; then only one that is no pending claim. Path-style serves it either way.
 */
export const servedUnderHostname = (
  row: DistributionRow,
  config: Pick<Config, "cdnHostnameVerification">,
): boolean => config.cdnHostnameVerification === "off" || !isPendingClaim(row);

/**
 * When a pending claim stops holding its name against other organizations
 * (CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS after its creation).
 */
export const claimExpiresAt = (row: DistributionRow, config: Pick<Config, "cdnHostnameClaimTtlMs">): Date =>
  laterBy(new Date(row.created_at), config.cdnHostnameClaimTtlMs);

/** A pending claim whose time is up: another organization's create of the name deletes it. */
export const isExpiredClaim = (
  row: DistributionRow,
  config: Pick<Config, "cdnHostnameClaimTtlMs">,
  now: Date,
): boolean => isPendingClaim(row) && claimExpiresAt(row, config) <= now;

/**
 * What a distribution shows of its verification when the platform verifies names; nothing for one
 * without a token (a library's distribution, whose name is the platform's). A pending one says when
 * it stops holding the name against other organizations.
 */
export function hostnameVerificationOf(
  row: DistributionRow,
  config: Pick<Config, "cdnHostnameVerification" | "cdnHostnameClaimTtlMs">,
): HostnameVerification | undefined {
  if (config.cdnHostnameVerification !== "dns" || row.hostname_token === null) return undefined;
  const verification: HostnameVerification = {
    status: row.hostname_verified_at === null ? "pending" : "verified",
    record_type: "TXT",
    record_name: challengeRecordName(row.hostname),
    record_value: row.hostname_token,
  };
  if (isPendingClaim(row)) verification.expires_at = claimExpiresAt(row, config).toISOString();
  return verification;
}

// A lookup answers within seconds even when the servers do not (an API request waits for it).
const LOOKUP_TIMEOUT_MS = 2000;
const LOOKUP_TRIES = 2;

export type ChallengeLookup =
  | { outcome: "found" }
  /** DNS answered: no such record, or one without the token; `reason` says which. */
  | { outcome: "missing"; reason: string }
  /** DNS gave no answer (timeout, SERVFAIL, refused): nothing is known of the record; `code` is the resolver's. */
  | { outcome: "failed"; code: string };

/** DNS's answer that the name, or its TXT record, does not exist: an answer, not a failure. */
const ABSENT_CODES = new Set(["ENODATA", "ENOTFOUND"]);

/**
 * Looks challenge records up, with one resolver for the service's life (the servers of
 * CUMULO_DNS_SERVERS, else the system's), each lookup bounded by the timeout and tries above.
 */
export class ChallengeResolver {
  readonly #resolver = new Resolver({ timeout: LOOKUP_TIMEOUT_MS, tries: LOOKUP_TRIES });

  constructor(config: Pick<Config, "dnsServers">) {
    if (config.dnsServers) this.#resolver.setServers(config.dnsServers);
  }

  /** Looks the distribution's TXT record up and says whether one of its values is the token. */
  async lookUp(challenge: { hostname: string; token: string }): Promise<ChallengeLookup> {
    let records: string[][];
    try {
      records = await this.#resolver.resolveTxt(challengeRecordName(challenge.hostname));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "EUNKNOWN";
      return ABSENT_CODES.has(code)
        ? { outcome: "missing", reason: "DNS has no such record" }
        : { outcome: "failed", code };
    }
    // A long TXT value comes as several strings; the value is their concatenation (RFC 7208, 3.3).
    const values = records.map((strings) => strings.join(""));
    if (values.includes(challenge.token)) return { outcome: "found" };
    return {
      outcome: "missing",
      reason: values.length === 0 ? "DNS has no such record" : "the record holds other values",
    };
  }
}
