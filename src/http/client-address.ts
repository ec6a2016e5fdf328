import ipaddr from "ipaddr.js";

/**
 * Who a per-address budget counts: the client's IPv4 address (IPv4-mapped IPv6 included), or the
 * /64 network of an IPv6 one. A single IPv6 subscriber is usually given a whole /64, so counting
 * single addresses would give one client 2^64 budgets.
 */
/** Whether a request came from this machine itself (127.0.0.0/8, ::1, or IPv4-mapped loopback). */
export function isLoopback(address: string): boolean {
  return ipaddr.isValid(address) && ipaddr.process(address).range() === "loopback";
}

export function clientNetwork(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === "ipv4") return parsed.toString();
  return `${ipaddr.IPv6.networkAddressFromCIDR(`${parsed.toString()}/64`).toString()}/64`;
}
