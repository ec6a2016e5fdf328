import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";
import { Agent } from "undici";

/** `::/96`: the deprecated IPv4-compatible IPv6 addresses (`::127.0.0.1`), which ipaddr.js calls unicast. */
const IPV4_COMPATIBLE: [ipaddr.IPv6, number] = [ipaddr.IPv6.parse("::"), 96];

/**
 * Cloud platform services inside public address space: Azure's WireServer (VM agent, DNS and
 * metadata relay). Every other provider's metadata service is link-local, private or CGNAT.
 */
const PLATFORM_ADDRESSES = new Set(["168.63.129.16"]);

/**
 * Refuses outbound connections to addresses that reach inside the platform (SSRF): loopback,
 * private, link-local (cloud metadata included), CGNAT, unspecified, multicast, reserved, cloud
 * platform services, and IPv6 forms that wrap such an address (IPv4-mapped, IPv4-compatible, NAT64,
 * 6to4, Teredo).
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6") {
    const ipv6 = parsed as ipaddr.IPv6;
    if (ipv6.isIPv4MappedAddress()) parsed = ipv6.toIPv4Address();
    else if (ipv6.match(IPV4_COMPATIBLE)) return false;
  }
  return parsed.range() === "unicast" && !PLATFORM_ADDRESSES.has(parsed.toNormalizedString());
}

/**
 * Whether non-public addresses may be reached: all of them (`true`), none (`false`), or those a
 * predicate admits (an allow-list of internal origins, e.g. URL imports' CUMULO_IMPORT_ALLOW_ADDRESSES).
 */
export type PrivateAccess = boolean | ((address: string) => boolean);

const mayReach = (address: string, access: PrivateAccess): boolean =>
  isPublicAddress(address) || (typeof access === "function" ? access(address) : access);

/**
 * `localhost` and every name under it, with or without the root's trailing dot: loopback by
 * definition (RFC 6761, 6.3), whatever this machine's resolver makes of them (glibc resolves only
 * `localhost` itself; systemd-resolved and browsers every `*.localhost`).
 */
export function isLocalhostName(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.$/, "");
  return name === "localhost" || name.endsWith(".localhost");
}

/** The loopback address a localhost name stands for in the checks, whatever the resolver says. */
const LOCALHOST_ADDRESS = "127.0.0.1";

export class BlockedAddressError extends Error {
  constructor(readonly hostname: string) {
    // The address a name resolved to is not told: whoever saves URLs could map the internal names.
    super(
      isIP(hostname)
        ? `${hostname} is a loopback, private or reserved address`
        : `${hostname} resolves to a loopback, private or reserved address`,
    );
    this.name = "BlockedAddressError";
  }
}

export type TargetCheck =
  | { outcome: "public" }
  | { outcome: "not_http" }
  | { outcome: "blocked"; reason: string };

/**
 * Checks a URL saved to be fetched later (a webhook, a CDN origin, an import source): it must be an
 * http(s) URL with a host (`not_http`), and its host is resolved now and every address it names
 * checked. A name that does not resolve (yet) names no private address and passes: the
 * connect-time check of `createGuardedAgent` still refuses it if it later resolves inside the network.
 */
export async function checkUrlTarget(text: string, allowPrivate: PrivateAccess): Promise<TargetCheck> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { outcome: "not_http" };
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") {
    return { outcome: "not_http" };
  }
  if (allowPrivate === true) return { outcome: "public" };
  const hostname = url.hostname.replace(/^\[|\]$/g, "");
  if (isIP(hostname)) {
    return mayReach(hostname, allowPrivate)
      ? { outcome: "public" }
      : { outcome: "blocked", reason: `${hostname} is not a public address` };
  }
  if (isLocalhostName(hostname) && !mayReach(LOCALHOST_ADDRESS, allowPrivate)) {
    return { outcome: "blocked", reason: new BlockedAddressError(hostname).message };
  }
  const addresses = await new Promise<LookupAddress[]>((resolve) =>
    dnsLookup(hostname, { all: true }, (error, found) => resolve(error ? [] : found)),
  );
  const blocked = addresses.some((entry) => !mayReach(entry.address, allowPrivate));
  return blocked
    ? { outcome: "blocked", reason: new BlockedAddressError(hostname).message }
    : { outcome: "public" };
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A DNS lookup (as `net.connect` takes it) that fails with `BlockedAddressError` when the name
 * resolves to an address `allowPrivate` does not let through: the check runs inside the lookup the
 * socket connects with, so a name cannot resolve one way when checked and another when used.
 */
export function guardedLookup(allowPrivate: PrivateAccess) {
  return (hostname: string, lookupOptions: object, callback: LookupCallback) => {
    if (isLocalhostName(hostname) && !mayReach(LOCALHOST_ADDRESS, allowPrivate)) {
      return callback(new BlockedAddressError(hostname), []);
    }
    dnsLookup(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      const blocked = addresses.some((entry) => !mayReach(entry.address, allowPrivate));
      if (blocked) return callback(new BlockedAddressError(hostname), []);
      const wantsAll = (lookupOptions as { all?: boolean }).all === true;
      const first = addresses[0];
      if (wantsAll || !first) return callback(null, addresses);
      return callback(null, first.address, first.family);
    });
  };
}

/**
 * An undici Agent whose connections go only to checked addresses (`guardedLookup`). Literal IP hosts
 * skip DNS, so `assertTargetAllowed` must be called on them before sending.
 */
export function createGuardedAgent(options: {
  allowPrivate: PrivateAccess;
  connectTimeoutMs: number;
}): Agent {
  const lookup = guardedLookup(options.allowPrivate);
  return new Agent({ connect: { lookup, timeout: options.connectTimeoutMs } as Agent.Options["connect"] });
}

/** The send-time check for a literal IP host (no DNS lookup happens for those). */
export function assertTargetAllowed(url: URL, allowPrivate: PrivateAccess): void {
  const hostname = url.hostname.replace(/^\[|\]$/g, "");
  if (isIP(hostname) && !mayReach(hostname, allowPrivate)) {
    throw new BlockedAddressError(hostname);
  }
}
