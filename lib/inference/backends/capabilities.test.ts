import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { shownUrl, UpstreamInput, UPSTREAM_KINDS } from "../../contracts/upstream";
import { ApiError } from "../../errors";
import { open, seal } from "../../secret-box";
import { BACKEND_LABEL, CAPABILITIES, OPTIONAL_PARAMS, unsupportedParams, upstreamBody } from "./capabilities";

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

  it("lists what a kind cannot take on an endpoint: exactly the parameters upstreamBody refuses there", () => {
    expect(unsupportedParams("ollama", "completions")).toContain("logprobs");
    expect(unsupportedParams("tgi", "completions")).toContain("logprobs");
    expect(unsupportedParams("tgi", "chat")).not.toContain("logprobs");
    expect(unsupportedParams("vllm", "completions")).toEqual(["tfs"]);
    const values: Record<string, unknown> = {
      top_k: 5,
      repetition_penalty: 1.2,
      n: 2,
      echo: true,
      seed: 1,
      logit_bias: { "5": 1 },
      logprobs: 1,
      bad_words: ["x"],
      tfs: 0.5,
    };
    for (const kind of UPSTREAM_KINDS)
      for (const endpoint of ["completions", "chat"] as const) {
        const off = unsupportedParams(kind, endpoint);
        for (const p of OPTIONAL_PARAMS) {
          if (p === "echo" && endpoint === "chat") continue; // not a chat parameter at all
          const input = endpoint === "chat" ? { messages: [{ role: "user" as const, content: "x" }] } : { prompt: "x" };
          const call = () => upstreamBody(kind, "m", { ...input, [p]: values[p] });
          if (off.includes(p)) expect(call, `${kind} ${endpoint} ${p}`).toThrow(ApiError);
          else expect(call, `${kind} ${endpoint} ${p}`).not.toThrow();
        }
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

  it("sends each kind values it accepts for the platform's defaults and edges", () => {
    // TGI refuses top_p 1 (its range is open): 1 is off, its default, so it is left out.
    expect(upstreamBody("tgi", "m", { prompt: "x", top_p: 1 }).body).not.toHaveProperty("top_p");
    expect(upstreamBody("tgi", "m", { prompt: "x", top_p: 0.9 }).body).toMatchObject({ top_p: 0.9 });
    for (const kind of ["vllm", "tgi"] as const) {
      const e = refusal(() => upstreamBody(kind, "m", { prompt: "x", top_p: 0 }));
      expect([e.status, e.param]).toEqual([400, "top_p"]);
      expect(e.message).toContain(BACKEND_LABEL[kind]);
    }
    // llama.cpp samples with its own defaults (0.8, top-k 40, 0.95, min-p 0.05) where nothing is sent.
    expect(upstreamBody("llamacpp", "m", { prompt: "x" }).body).toMatchObject({
      temperature: 1,
      top_p: 1,
      top_k: 0,
      min_p: 0,
    });
    expect(upstreamBody("llamacpp", "m", { prompt: "x", temperature: 0.2, top_k: 5 }).body).toMatchObject({
      temperature: 0.2,
      top_k: 5,
    });
    expect(upstreamBody("vllm", "m", { prompt: "x" }).body).not.toHaveProperty("top_k");
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
