// Which upstream URLs a team's owner may point a deployment at from the dashboard. The app itself
// calls them (and relays their 4xx answers), so a URL on this machine (loopback) or a link-local
// address (169.254.169.254 is the clouds' metadata service) would let whoever signs up probe what
// only the app can reach. Those need the operator: listed in UPSTREAM_ALLOWED_HOSTS (`host` or
// `host:port`), or the deployment created with the CLI. Private networks (10/8, 192.168/16…),
// where GPU fleets live, are allowed. A name is resolved once, here, when the deployment is made.
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";

/** Loopback, unspecified or link-local: this machine, or what only it can reach. */
export function isLocalAddress(address: string): boolean {
  const a = address.toLowerCase().replace(/^::ffff:/, "");
  if (isIP(a) === 4) return /^(127\.|0\.|169\.254\.)/.test(a);
  return a === "::1" || a === "::" || /^fe[89ab][0-9a-f]:/.test(a);
}

/**
 * Why `url` may not be a team's upstream, or null when it may. `allowed`: the operator's
 * UPSTREAM_ALLOWED_HOSTS entries (lower-case `host` or `host:port`).
 */
export async function refusedUpstream(url: string, allowed: readonly string[]): Promise<string | null> {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const port = u.port || (u.protocol === "https:" ? "443" : "80");
  if (allowed.includes(host) || allowed.includes(`${host}:${port}`)) return null;
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
