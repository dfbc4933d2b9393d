import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { shownUrl, UpstreamInput, UPSTREAM_KINDS } from "../../contracts/upstream";
import { ApiError } from "../../errors";
import { open, seal } from "../../secret-box";
import { BACKEND_LABEL, CAPABILITIES, OPTIONAL_PARAMS, upstreamBody } from "./capabilities";

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return e as ApiError;
  }
  throw new Error("not refused");
};

describe("upstream capability table", () => {
  it("is the one docs/api.md prints", () => {
    const doc = readFileSync(path.resolve(import.meta.dirname, "../../../docs/api.md"), "utf8");
    for (const p of OPTIONAL_PARAMS) {
      const row = doc.split("\n").find((l) => l.startsWith(`| \`${p}\``));
      expect(row, p).toBeTruthy();
      const cells = row!
        .split("|")
        .slice(2, -1)
        .map((c) => c.trim());
      expect(cells).toEqual(
        UPSTREAM_KINDS.map((k) => {
          const s = CAPABILITIES[k][p];
          return !s ? "refused" : `\`${s.as}\`${s.only ? ` (${s.only} only)` : ""}`;
        }),
      );
    }
  });

  it("forwards a supported parameter under the kind's name and refuses the rest, naming both", () => {
    expect(upstreamBody("llamacpp", "m", { prompt: "x", repetition_penalty: 1.1 }).body).toMatchObject({
      repeat_penalty: 1.1,
    });
    for (const kind of UPSTREAM_KINDS) {
      const e = refusal(() => upstreamBody(kind, "m", { prompt: "x", tfs: 0.5 }));
      expect(e).toBeInstanceOf(ApiError);
      expect(e.status).toBe(400);
      expect(e.param).toBe("tfs");
      expect(e.message).toContain(BACKEND_LABEL[kind]);
    }
    const chatOnly = refusal(() => upstreamBody("tgi", "m", { prompt: "x", logprobs: 2 }));
    expect(chatOnly.param).toBe("logprobs");
    expect(upstreamBody("tgi", "m", { messages: [{ role: "user", content: "x" }], logprobs: 2 }).body).toMatchObject({
      logprobs: true,
      top_logprobs: 2,
    });
  });
});

describe("secret box", () => {
  it("opens what it sealed for the same row and secret only", () => {
    const secret = "s".repeat(40);
    const sealed = seal("sk-123", "deployment_a", secret);
    expect(sealed).not.toContain("sk-123");
    expect(open(sealed, "deployment_a", secret)).toBe("sk-123");
    expect(() => open(sealed, "deployment_b", secret)).toThrow();
    expect(() => open(sealed, "deployment_a", "t".repeat(40))).toThrow();
  });
});

describe("upstream URLs", () => {
  it("are taken with or without /v1 and shown without user information", () => {
    const parsed = UpstreamInput.parse({ urls: ["http://gpu-1:8000/v1/", "https://u:p@gpu-2"], model: "m" });
    expect(parsed).toMatchObject({ kind: "openai", urls: ["http://gpu-1:8000", "https://u:p@gpu-2"] });
    expect(parsed.urls.map(shownUrl)).toEqual(["http://gpu-1:8000", "https://***@gpu-2"]);
    expect(UpstreamInput.safeParse({ urls: ["ftp://x"], model: "m" }).success).toBe(false);
    expect(UpstreamInput.safeParse({ urls: [], model: "m" }).success).toBe(false);
  });
});
