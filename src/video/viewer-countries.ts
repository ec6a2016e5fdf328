import { readFileSync, type Stats, statSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { performance } from "node:perf_hooks";
import proxyAddr from "@fastify/proxy-addr";
import type { FastifyBaseLogger } from "fastify";
import ipaddr from "ipaddr.js";
import { LRUCache } from "lru-cache";
import { type CountryResponse, Reader } from "mmdb-lib";
import type { Config } from "../config.ts";
import { first } from "./access.ts";

/**
 * The last of a header's comma-separated values: a proxy that adds its own line after the viewer's
 * (Node joins repeated lines as "FR, DE") is the nearest, so its value counts, as with
 * `X-Forwarded-For` read from the right.
 */
const lastValue = (header: string | string[] | undefined): string | undefined =>
  first(header)?.split(",").at(-1)?.trim();

/**
 * The country a CDN in front names in `CF-IPCountry`, else `X-Viewer-Country`, upper-case. An empty
 * header names none: a viewer's empty `CF-IPCountry` does not hide a proxy's `X-Viewer-Country`.
 */
function namedCountry(headers: IncomingMessage["headers"]): string | undefined {
  const named = lastValue(headers["cf-ipcountry"]) || lastValue(headers["x-viewer-country"]);
  return named?.toUpperCase() || undefined;
}

/** Which copy of the file a reader was made from: a copy renamed into place is a new inode. */
const versionOf = (stats: Stats) => `${stats.ino}:${stats.size}:${stats.mtimeMs}`;

/** Decoded records kept per reader; a country database has a few hundred distinct ones. */
const DECODED_RECORDS_KEPT = 10_000;

function readerOf(bytes: Buffer): Reader<CountryResponse> {
  const reader = new Reader<CountryResponse>(bytes, {
    cache: new LRUCache<number, object>({ max: DECODED_RECORDS_KEPT }),
  });
  // A file cut short may keep its metadata and break only on lookups: one lookup finds out now.
  reader.get("0.0.0.0");
  return reader;
}

const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * A MaxMind DB file of address countries (GeoLite2 or GeoIP2 Country or City, DB-IP Country Lite),
 * read again when a newer copy replaces it: such files are refreshed weekly by tools like
 * geoipupdate, which rename the new copy into place.
 */
class CountryDatabase {
  #reader: Reader<CountryResponse>;
  #version: string;
  #checkedAt = performance.now();
  #checking = false;

  constructor(
    private readonly path: string,
    private readonly recheckMs: number,
    private readonly logger: FastifyBaseLogger,
  ) {
    try {
      this.#version = versionOf(statSync(path));
      this.#reader = readerOf(readFileSync(path));
    } catch (error) {
      throw new Error(`cannot read the GeoIP database (CUMULO_GEOIP_DATABASE) ${path}: ${reason(error)}`);
    }
    this.#logRead("GeoIP database read");
  }

  /** When the copy in use was built: an old one places viewers where their addresses used to be. */
  get builtAt(): Date {
    return this.#reader.metadata.buildEpoch;
  }

  #logRead(message: string): void {
    const { databaseType, buildEpoch } = this.#reader.metadata;
    this.logger.info({ path: this.path, databaseType, builtAt: buildEpoch.toISOString() }, message);
  }

  /** The address's country code; undefined for an address the database does not place. */
  countryOf(address: string): string | undefined {
    this.#recheckIfDue();
    if (!ipaddr.isValid(address)) return undefined;
    // IPv4-mapped IPv6 (a dual-stack listener's view of IPv4 clients) is looked up as IPv4.
    const found = this.#reader.get(ipaddr.process(address).toString());
    // Some ranges (anycast, satellite) carry only the country they are registered in.
    return (found?.country?.iso_code ?? found?.registered_country?.iso_code)?.toUpperCase();
  }

  /** At most once per `recheckMs`, in the background: a lookup never waits for the file. */
  #recheckIfDue(): void {
    const now = performance.now();
    if (this.#checking || now - this.#checkedAt < this.recheckMs) return;
    this.#checking = true;
    this.#checkedAt = now;
    void this.#reloadIfReplaced().finally(() => {
      this.#checking = false;
    });
  }

  async #reloadIfReplaced(): Promise<void> {
    const version = await stat(this.path).then(versionOf, (error: unknown) => `unreadable: ${reason(error)}`);
    if (version === this.#version) return;
    // Remembered before reading, so a broken copy is reported once rather than at every check.
    this.#version = version;
    try {
      this.#reader = readerOf(await readFile(this.path));
      this.#logRead("GeoIP database reloaded");
    } catch (error) {
      this.logger.warn(
        { err: error, path: this.path },
        "GeoIP database not reloaded: the copy read before stays in use",
      );
    }
  }
}

/**
 * Where playback's country rules get the viewer's country. Without a GeoIP database, from the
 * header a CDN in front sets. With one, from the database by the viewer's address: then a header
 * counts only when a proxy of CUMULO_TRUST_PROXY sent it, since any viewer can send one of their own.
 * Behind such proxies the viewer's address is the one their `X-Forwarded-For` names.
 */
export class ViewerCountries {
  readonly #trusted: (address: string, hop: number) => boolean;

  private constructor(
    trustProxy: string[],
    private readonly database: CountryDatabase | undefined,
  ) {
    this.#trusted = proxyAddr.compile(trustProxy);
  }

  /** Opens the configured database (start-up fails on an unreadable one) for processes that serve playback. */
  static open(config: Config, logger: FastifyBaseLogger): ViewerCountries {
    const servesPlayback = config.roles.includes("api") || config.roles.includes("edge");
    const database =
      config.geoip && servesPlayback
        ? new CountryDatabase(config.geoip.database, config.geoip.recheckMs, logger)
        : undefined;
    return new ViewerCountries(config.trustProxy, database);
  }

  /** When the database in use was built; undefined without one. */
  get databaseBuiltAt(): Date | undefined {
    return this.database?.builtAt;
  }

  of(request: IncomingMessage): string | undefined {
    const named = namedCountry(request.headers);
    if (!this.database) return named;
    const peer = request.socket.remoteAddress;
    if (peer === undefined) return undefined;
    if (named !== undefined && this.#trusted(peer, 0)) return named;
    return this.database.countryOf(proxyAddr(request, this.#trusted));
  }
}
