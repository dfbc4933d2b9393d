import { readdirSync } from "node:fs";
import path from "node:path";
import { NextRequest } from "next/server";
import { describe, expect, it } from "vitest";
import { config, proxy } from "@/proxy";
import { REQUEST_PATH_HEADER } from "./request-path";

describe("proxy.ts", () => {
  it("covers every section of the dashboard, and nothing else", () => {
    const dashboard = path.resolve(import.meta.dirname, "../../app/(dashboard)");
    const sections = readdirSync(dashboard, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => `/${entry.name}/:path*`);
    expect([...config.matcher].sort()).toEqual(sections.sort());
  });

  it("names the page asked for, with its query, over any value the client sent", () => {
    const request = new NextRequest("http://localhost:3000/pipelines/pipe_1?userId=u2&meta.lang=en", {
      headers: { [REQUEST_PATH_HEADER]: "/elsewhere" },
    });
    const response = proxy(request);
    // How Next hands the rewritten request headers to the page (NextResponse.next({ request })).
    expect(response.headers.get(`x-middleware-request-${REQUEST_PATH_HEADER}`)).toBe(
      "/pipelines/pipe_1?userId=u2&meta.lang=en",
    );
    expect(response.headers.get("x-middleware-override-headers")).toContain(REQUEST_PATH_HEADER);
  });
});
