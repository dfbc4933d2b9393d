import { afterEach, describe, expect, it } from "vitest";
import { resetEnvCache } from "../env";
import { metricsAccess } from "./scrape";
import { routePattern } from "./request";

afterEach(() => {
  delete process.env.METRICS_TOKEN;
  delete process.env.PUBLIC_URL;
  resetEnvCache();
});

describe("metrics access", () => {
  it("answers loopback only without METRICS_TOKEN", () => {
    expect(metricsAccess({}, "127.0.0.1")).toBe(200);
    expect(metricsAccess({}, "::1")).toBe(200);
    expect(metricsAccess({}, "::ffff:127.0.0.1")).toBe(200);
    expect(metricsAccess({}, "192.0.2.7")).toBe(403);
    expect(metricsAccess({ authorization: "Bearer anything" }, "10.1.2.3")).toBe(403);
  });

  it("goes by what the app's server saw of the request, before Next.js added headers of its own", () => {
    process.env.LMP_PROXIED_NONCE = "n0nce";
    try {
      const nextAdds = { "x-forwarded-for": "127.0.0.1", "x-forwarded-host": "localhost:3000" };
      expect(metricsAccess({ ...nextAdds, "x-lmp-proxied": "0:n0nce" }, "127.0.0.1")).toBe(200);
      expect(metricsAccess({ ...nextAdds, "x-lmp-proxied": "1" }, "127.0.0.1")).toBe(403);
      // A client's own "not proxied" does not know the secret.
      expect(metricsAccess({ ...nextAdds, "x-lmp-proxied": "0" }, "127.0.0.1")).toBe(403);
      expect(metricsAccess({ "x-lmp-proxied": "0:guess" }, "127.0.0.1")).toBe(403);
    } finally {
      delete process.env.LMP_PROXIED_NONCE;
    }
  });

  it("refuses what a proxy on this machine forwards: it connects from loopback for everyone", () => {
    expect(metricsAccess({ "x-forwarded-for": "203.0.113.9" }, "127.0.0.1")).toBe(403);
    expect(metricsAccess({ forwarded: "for=203.0.113.9" }, "::1")).toBe(403);
    expect(metricsAccess({ "x-real-ip": "203.0.113.9" }, "127.0.0.1")).toBe(403);
  });

  it("needs the token once PUBLIC_URL is public: a proxy on this machine may forward without a header", () => {
    for (const url of ["http://localhost:3000", "http://127.0.0.1:3000", "http://[::1]:3000"]) {
      process.env.PUBLIC_URL = url;
      resetEnvCache();
      expect(metricsAccess({}, "127.0.0.1"), url).toBe(200);
    }
    process.env.PUBLIC_URL = "https://lm.example.com";
    resetEnvCache();
    // Before: 200, to whatever nginx's plain proxy_pass forwarded.
    expect(metricsAccess({}, "127.0.0.1")).toBe(403);
    process.env.METRICS_TOKEN = "scrape-token-0123456789";
    resetEnvCache();
    expect(metricsAccess({ authorization: "Bearer scrape-token-0123456789" }, "127.0.0.1")).toBe(200);
  });

  it("requires the token from everywhere once it is set, loopback included", () => {
    process.env.METRICS_TOKEN = "scrape-token-0123456789";
    resetEnvCache();
    expect(metricsAccess({ authorization: "Bearer scrape-token-0123456789" }, "10.1.2.3")).toBe(200);
    expect(
      metricsAccess({ authorization: "Bearer scrape-token-0123456789", "x-forwarded-for": "203.0.113.9" }, "127.0.0.1"),
    ).toBe(200);
    expect(metricsAccess({}, "127.0.0.1")).toBe(401);
    expect(metricsAccess({ authorization: "Bearer wrong" }, "127.0.0.1")).toBe(401);
  });
});

describe("route patterns", () => {
  it("puts parameter names in place of their values, catch-alls included", () => {
    expect(routePattern("/v1/pipelines/pipe_abc/add", { id: "pipe_abc" })).toBe("/v1/pipelines/[id]/add");
    expect(routePattern("/deployments/acme/chat", { team: "acme", name: "chat" })).toBe("/deployments/[team]/[name]");
    expect(routePattern("/v1/no/such/path", { path: ["no", "such", "path"] })).toBe("/v1/[...path]");
    expect(routePattern("/v1/blobs/datasets/d%20x/f.jsonl", { key: ["datasets", "d x", "f.jsonl"] })).toBe(
      "/v1/blobs/[...key]",
    );
    expect(routePattern("/v1/pipelines/list", {})).toBe("/v1/pipelines/list");
  });
});
