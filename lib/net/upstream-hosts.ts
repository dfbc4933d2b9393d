// Which upstream URLs a team's owner may point a deployment at from the dashboard. The app itself
// calls them (and relays their 4xx answers), so a URL on this machine (loopback) or a link-local
// address (169.254.169.254 is the clouds' metadata service) would let whoever signs up probe what
// only the app can reach. Those need the operator: listed in UPSTREAM_ALLOWED_HOSTS (`host` or
// `host:port`), or the deployment created with the CLI. Private networks (10/8, 192.168/16…),
// where GPU fleets live, are allowed. A name is checked when the deployment is made (a clear
// error at once) and again at every connection the app opens to it (checkedLookup): a name that
// resolved elsewhere at creation may be pointed at 127.0.0.1 afterwards (DNS rebinding).
import dns from "node:dns";
import { lookup } from "node:dns/promises";
import { BlockList, isIP, type LookupFunction } from "node:net";

/**
 * Loopback, unspecified or link-local, in any spelling: IPv4 (127/8, 0/8, 169.254/16), IPv6
 * (::1, ::, fe80::/10, the old IPv4-compatible ::/96) and IPv4-mapped IPv6 (::ffff:127.0.0.1,
 * which URLs write as [::ffff:7f00:1], and which connects to 127.0.0.1): BlockList compares the
 * addresses, not their text.
 */
const LOCAL = new BlockList();
LOCAL.addSubnet("127.0.0.0", 8, "ipv4");
LOCAL.addSubnet("0.0.0.0", 8, "ipv4");
LOCAL.addSubnet("169.254.0.0", 16, "ipv4");
LOCAL.addSubnet("::", 96, "ipv6");
LOCAL.addSubnet("fe80::", 10, "ipv6");

/** Loopback, unspecified or link-local: this machine, or what only it can reach. */
export function isLocalAddress(address: string): boolean {
  const kind = isIP(address);
  return kind !== 0 && LOCAL.check(address, kind === 4 ? "ipv4" : "ipv6");
}

/**
 * Why `url` may not be a team's upstream, or null when it may. `allowed`: the operator's
 * UPSTREAM_ALLOWED_HOSTS entries (lower-case `host` or `host:port`).
 */
export async function refusedUpstream(url: string, allowed: readonly string[]): Promise<string | null> {
  if (allowedUpstream(url, allowed)) return null;
  const host = hostOf(new URL(url));
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((r) => r.address);
  } catch {
    return `its host ${host} cannot be resolved`;
  }
  const local = addresses.find(isLocalAddress);
  return local
    ? `${host} is ${local === host ? "" : `${local}, `}this machine or a link-local address; the operator may allow it ` +
        "(UPSTREAM_ALLOWED_HOSTS) or create the deployment with the CLI"
    : null;
}

const hostOf = (u: URL) => u.hostname.replace(/^\[|\]$/g, "").toLowerCase();

/** Whether the operator's UPSTREAM_ALLOWED_HOSTS lists `url`'s host (or host:port). */
export function allowedUpstream(url: string, allowed: readonly string[]): boolean {
  if (allowed.length === 0) return false;
  const u = new URL(url);
  const host = hostOf(u);
  const port = u.port || (u.protocol === "https:" ? "443" : "80");
  return allowed.includes(host) || allowed.includes(`${host}:${port}`);
}

/** `url`'s host when it is a local IP address (which no lookup sees). */
export function localLiteral(url: string): string | null {
  const host = hostOf(new URL(url));
  return isIP(host) && isLocalAddress(host) ? host : null;
}

/** A connection refused because its host resolved to a local address (see checkedLookup). */
export class LocalUpstreamError extends Error {
  readonly code = "ELOCALUPSTREAM";
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`${host} resolves to ${address}, this machine or a link-local address`);
    this.name = "LocalUpstreamError";
  }
}

/**
 * net.connect's `lookup` for the upstreams a team's owner chose: resolves as usual, and fails
 * the connection with a LocalUpstreamError when any address is local. An IP literal is never
 * looked up, and was checked when the deployment was made.
 */
export const checkedLookup: LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, "", 0);
    const local = addresses.find((a) => isLocalAddress(a.address));
    if (local) return callback(new LocalUpstreamError(hostname, local.address), "", 0);
    if (options.all) return callback(null, addresses);
    if (addresses.length === 0)
      return callback(Object.assign(new Error(`${hostname}: no address`), { code: "ENOTFOUND" }), "", 0);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  });
};
