// The client's network address, for the limits kept per address (sign-in, sign-up). The app's
// server (scripts/lib/app-server.mjs) writes it into this header on every request, over
// whatever the client sent: the connection's own address, or, when that is a proxy on a
// loopback or private address, the X-Forwarded-For entry that proxy appended (TRUST_PROXY_HOPS
// from the right; entries further left are whatever the client wrote). Before, the first
// X-Forwarded-For entry was taken as is, so a client that varied it had no per-address limit.
export const CLIENT_ADDRESS_HEADER = "x-lmp-client-address";

/** The address from the headers; under `next dev` (no app server) the first X-Forwarded-For entry. */
export function clientAddress(header: (name: string) => string | null | undefined): string | undefined {
  return header(CLIENT_ADDRESS_HEADER) ?? header("x-forwarded-for")?.split(",")[0]?.trim() ?? undefined;
}
