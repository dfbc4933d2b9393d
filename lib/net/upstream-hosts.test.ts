import { describe, expect, it } from "vitest";
import type { LookupAddress } from "node:dns";
import { allowedUpstream, checkedLookup, isLocalAddress, localLiteral, refusedUpstream } from "./upstream-hosts";

/** checkedLookup's answer for `host` (net.connect asks with `all: true`, or for one address). */
const looked = (host: string, all: boolean) =>
  new Promise<{ err: Error | null; address: string | LookupAddress[] }>((resolve) =>
    checkedLookup(host, { all }, (err, address) => resolve({ err, address })),
  );

describe("upstream hosts a team may use", () => {
  it("knows this machine and link-local addresses", () => {
    const local = [
      ...["127.0.0.1", "127.8.9.1", "0.0.0.0", "169.254.169.254", "::1", "::", "fe80::1", "::ffff:127.0.0.1"],
      // IPv4-mapped as URLs write them (hex), and IPv4-compatible: they connect to 127.0.0.1 & co.
      ...["::ffff:7f00:1", "::ffff:a9fe:a9fe", "::ffff:0:0", "0:0:0:0:0:ffff:7f00:1", "::7f00:1", "FE80::1"],
    ];
    const remote = ["10.0.0.5", "192.168.1.20", "172.16.0.1", "8.8.8.8", "fd00::1", "2001:db8::1", "::ffff:a00:5"];
    expect(local.filter(isLocalAddress)).toEqual(local);
    expect(remote.filter(isLocalAddress)).toEqual([]);
  });

  it("refuses URLs on this machine or link-local, by address or by name, unless the operator lists them", async () => {
    expect(await refusedUpstream("http://169.254.169.254/latest", [])).toMatch(/^169\.254\.169\.254 is this machine/);
    expect(await refusedUpstream("http://localhost:8000", [])).toMatch(
      /^localhost is (127\.0\.0\.1|::1), this machine/,
    );
    expect(await refusedUpstream("http://[::1]:8000", [])).toMatch(/UPSTREAM_ALLOWED_HOSTS/);
    for (const url of ["http://[::ffff:127.0.0.1]:8000", "http://[::ffff:a9fe:a9fe]/", "http://2130706433:8000"])
      expect(await refusedUpstream(url, []), url).toMatch(/this machine or a link-local address/);
    expect(localLiteral("http://[::ffff:127.0.0.1]:8000")).toBe("::ffff:7f00:1");
    expect(await refusedUpstream("http://10.1.2.3:8000", [])).toBeNull();
    expect(await refusedUpstream("https://192.168.0.7", [])).toBeNull();
    // Listed: the host (any port), or the host and port.
    expect(await refusedUpstream("http://127.0.0.1:8000", ["127.0.0.1"])).toBeNull();
    expect(await refusedUpstream("http://localhost:8000", ["localhost:8000"])).toBeNull();
    expect(await refusedUpstream("http://localhost:8001", ["localhost:8000"])).not.toBeNull();
    expect(await refusedUpstream("http://no-such-host.invalid", [])).toMatch(/cannot be resolved/);
  });

  it("at connection time: refuses a name that resolves to this machine, and local literals", async () => {
    for (const all of [true, false]) {
      const { err } = await looked("localhost", all);
      expect(err).toMatchObject({ name: "LocalUpstreamError", code: "ELOCALUPSTREAM", host: "localhost" });
      expect(err!.message).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), this machine or a link-local address$/);
    }
    expect((await looked("no-such-host.invalid", true)).err).toMatchObject({ code: "ENOTFOUND" });
    expect(localLiteral("http://127.0.0.1:80")).toBe("127.0.0.1");
    expect(localLiteral("http://[::1]:80")).toBe("::1");
    expect(localLiteral("http://10.0.0.1:80")).toBeNull();
    expect(localLiteral("http://localhost:80")).toBeNull(); // a name: the lookup checks it
    expect(allowedUpstream("http://LocalHost:8000/v1", ["localhost"])).toBe(true);
    expect(allowedUpstream("https://gpu:8443", ["gpu:8443"])).toBe(true);
    expect(allowedUpstream("https://gpu", ["gpu:8443"])).toBe(false);
  });
});
