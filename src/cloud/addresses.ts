/** IPv4 pools given as CIDR blocks (`203.0.113.0/24`), and the lowest-free-address rule. */

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

export const isIpv4 = (text: string): boolean => IPV4.test(text);

export function ipv4ToNumber(address: string): number {
  return address.split(".").reduce((acc, part) => acc * 256 + Number(part), 0);
}

export function numberToIpv4(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join(".");
}

export interface Pool {
  /** First and last usable host address (network and broadcast addresses excluded). */
  first: number;
  last: number;
}

export function parsePool(cidr: string): Pool {
  const match = /^([\d.]+)\/(\d{1,2})$/.exec(cidr.trim());
  if (!match || !isIpv4(match[1] as string) || Number(match[2]) > 30 || Number(match[2]) < 8) {
    throw new Error(`invalid address pool "${cidr}" (expected an IPv4 CIDR block from /8 to /30)`);
  }
  const size = 2 ** (32 - Number(match[2]));
  const network = ipv4ToNumber(match[1] as string) - (ipv4ToNumber(match[1] as string) % size);
  return { first: network + 1, last: network + size - 2 };
}

export const poolContains = (pool: Pool, address: string): boolean => {
  if (!isIpv4(address)) return false;
  const value = ipv4ToNumber(address);
  return value >= pool.first && value <= pool.last;
};

/** The lowest address of the pool not in `used`, or undefined when the pool is exhausted. */
export function lowestFree(pool: Pool, used: Iterable<string>): string | undefined {
  const taken = new Set<number>();
  for (const address of used) if (isIpv4(address)) taken.add(ipv4ToNumber(address));
  for (let value = pool.first; value <= pool.last; value++) {
    if (!taken.has(value)) return numberToIpv4(value);
  }
  return undefined;
}
