import { describe, expect, it } from "vitest";
import { safeCallback } from "./safe-callback";

describe("safeCallback", () => {
  it("keeps paths on this site, query included", () => {
    expect(safeCallback("/pipelines/pipe_1?userId=u1&meta.lang=en")).toBe("/pipelines/pipe_1?userId=u1&meta.lang=en");
  });
  it("refuses other origins and falls back to the pipelines list", () => {
    for (const url of [
      "https://evil.example/",
      "//evil.example",
      "/\\evil.example",
      // As the sign-in page receives `/sign-in?callbackUrl=/%09/evil.example`, decoded: a tab,
      // which browsers drop, so it reads as `//evil.example`.
      "/\t/evil.example",
      "/\n/evil.example",
      "/\r\n//evil.example",
      "/\\/evil.example",
      // Dot segments that leave an empty first segment: `//evil.example` once resolved.
      "/.//evil.example/login",
      "/%2e//evil.example",
      "/a/..//evil.example",
      "javascript:alert(1)",
      "",
      undefined,
    ]) {
      expect(safeCallback(url), String(url)).toBe("/pipelines");
    }
  });
});
