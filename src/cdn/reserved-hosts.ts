import type { Config } from "../config.ts";
import { isLocalhostName } from "../net/address-guard.ts";
import type { DistributionRow } from "./tables.ts";

/** The settings that decide which host names belong to the platform. */
export type HostNameSettings = Pick<Config, "host" | "publicUrl" | "edgePublicUrl" | "mediaDomain">;

// WHATWG URL parsers read a host whose last label is a number (decimal or 0x-hex) as an IPv4 address.
const NUMERIC_LABEL = /^(?:\d+|0x[0-9a-f]*)$/i;

const hostnameOf = (url: string | undefined): string | undefined => {
  if (url === undefined) return undefined;
  try {
    return new URL(url).hostname.toLowerCase().replace(/\.$/, "");
  } catch {
    return undefined;
  }
};

/**
 * Why a host name belongs to the platform and no organization may name a distribution after it, or
 * undefined when it is free: the API's and edge's own names, `localhost`, IP literals of any kind
 * (an address is never an organization's name, and loopback/private ones are the edge's own), and the
 * media domain with every name under it (library distributions are created by the platform itself).
 */
export function reservedHostReason(hostname: string, settings: HostNameSettings): string | undefined {
  const name = hostname.toLowerCase().replace(/\.$/, "");
  const own = [settings.host, hostnameOf(settings.publicUrl), hostnameOf(settings.edgePublicUrl)];
  if (own.some((host) => host?.toLowerCase() === name)) return "it is a host name of this platform";
  if (isLocalhostName(name)) return "localhost names are reserved";
  if (NUMERIC_LABEL.test(name.slice(name.lastIndexOf(".") + 1))) return "IP addresses are reserved";
  const media = settings.mediaDomain;
  if (name === media || name.endsWith(`.${media}`))
    return `names under ${media} are reserved for media libraries`;
  return undefined;
}

/** A library's own distribution `{library_id}.{media domain}`, the one kind served under a reserved name. */
const isLibraryOwnName = (row: DistributionRow, settings: HostNameSettings): boolean =>
  row.library_id !== null && row.hostname === `${row.library_id}.${settings.mediaDomain}`;

/**
 * Whether the edge may serve this distribution: a reserved name held by anything but the library it was
 * made for (a row written before names were reserved) is never served, so it cannot shadow playback.
 */
export const mayServe = (row: DistributionRow, settings: HostNameSettings): boolean =>
  isLibraryOwnName(row, settings) || reservedHostReason(row.hostname, settings) === undefined;
