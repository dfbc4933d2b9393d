// The headers every answer of a deployment endpoint carries, refusals included: the request id,
// CORS, and (once the key is known) its rate-limit state. The endpoint is a Pages Router API route
// behind a rewrite (lib/http/node-deployment-route.ts), which writes each of them itself.
import { afterAll, describe, expect, it } from "vitest";
import { randomToken } from "@/lib/ids";
import { createDeployment } from "@/lib/services/deployments";
import { baseUrl, db, makeTeam } from "../helpers/context";
import { makeTeamWithDeployment, parseSse } from "../helpers/deployments";
import { startFakeUpstream, type FakeUpstream } from "../helpers/fake-upstream";

const post = (url: string, headers: Record<string, string>, body: string) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

function expectCommon(res: Response) {
  expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
  expect(res.headers.get("access-control-allow-origin")).toBe("*");
  expect(res.headers.get("access-control-expose-headers")?.split(", ")).toEqual([
    "x-request-id",
    "retry-after",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
  ]);
}

describe("a deployment endpoint's answers", () => {
  it("401 and 404: the error body, the request id and CORS", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const unauthorized = await post(dep.url, { authorization: "Bearer nope" }, "{}");
    expect(unauthorized.status).toBe(401);
    expectCommon(unauthorized);
    expect(((await unauthorized.json()) as any).error.type).toBeTruthy();
    const missing = await post(`${dep.url}-gone`, { authorization: `Bearer ${team.modelKey}` }, "{}");
    expect(missing.status).toBe(404);
    expectCommon(missing);
    expect(((await missing.json()) as any).error.message).toMatch(/No deployment named/);
  });

  it("400 after the key is known: the rate-limit headers too, and the parameter named", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const bad = await post(dep.url, { authorization: `Bearer ${team.modelKey}` }, JSON.stringify({ max_tokens: "x" }));
    expect(bad.status).toBe(400);
    expectCommon(bad);
    expect(Number(bad.headers.get("ratelimit-limit"))).toBeGreaterThan(0);
    expect(bad.headers.get("ratelimit-remaining")).not.toBeNull();
    expect(((await bad.json()) as any).error.param).toBeTruthy();
    const notJson = await post(dep.url, { authorization: `Bearer ${team.modelKey}` }, "{");
    expect(notJson.status).toBe(400);
    expect(notJson.headers.get("ratelimit-limit")).not.toBeNull();
  });

  it("a streamed answer: SSE headers, uncompressed even for a client that accepts gzip", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const res = await post(
      dep.url,
      { authorization: `Bearer ${team.modelKey}`, "accept-encoding": "gzip, deflate" },
      JSON.stringify({ prompt: "Hi", max_tokens: 2, stream: true }),
    );
    expect(res.status).toBe(200);
    expectCommon(res);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache, no-transform");
    expect(res.headers.get("content-encoding")).toBeNull();
    expect(res.headers.get("ratelimit-limit")).not.toBeNull();
    expect(await res.text()).toMatch(/data: \[DONE\]\n\n$/);
  });

  it("a method other than GET, POST or OPTIONS: 405 in the error shape", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const res = await fetch(dep.url, { method: "DELETE", headers: { authorization: `Bearer ${team.modelKey}` } });
    expect(res.status).toBe(405);
    expectCommon(res);
    expect(res.headers.get("allow")).toMatch(/GET/);
    expect(((await res.json()) as any).error.type).toBe("invalid_request");
    // HEAD too (docs/api.md): running GET for it would open a generation.
    const head = await fetch(dep.url, { method: "HEAD", headers: { authorization: `Bearer ${team.modelKey}` } });
    expect(head.status).toBe(405);
    expect(head.headers.get("allow")).toBe("OPTIONS, POST, GET");
  });
});

describe("a streamed answer to a slow reader", () => {
  let up: FakeUpstream | undefined;
  afterAll(async () => up?.close());

  it("gets every event, in order: the app waits for the socket to drain instead of dropping or piling up", async () => {
    // 2 MB of events, far more than the socket and the client take while the client is not reading.
    const n = 500;
    const text = (i: number) => ` ${String(i).padStart(4, "0")}${"x".repeat(4000)}`;
    const ev = (i: number) =>
      `data: ${JSON.stringify({ id: "c", object: "text_completion", model: "m", choices: [{ index: 0, text: text(i), logprobs: null, finish_reason: i === n - 1 ? "length" : null }] })}\n\n`;
    const writes: string[] = [];
    for (let i = 0; i < n; i += 50) writes.push(Array.from({ length: 50 }, (_, j) => ev(i + j)).join(""));
    writes.push("data: [DONE]\n\n");
    up = await startFakeUpstream("vllm", { type: "raw", writes });
    const team = await makeTeam();
    const dep = await createDeployment(db().db, {
      teamId: team.id,
      name: `up-${randomToken(8)}`,
      upstream: { kind: "vllm", urls: [up.url], model: "m" },
    });
    const res = await fetch(`${baseUrl}/deployments/${team.slug}/${dep.name}`, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Hi", max_tokens: n, stream: true }),
    });
    expect(res.status).toBe(200);
    await new Promise((r) => setTimeout(r, 500)); // not reading: the app's writes fill the socket
    const events = parseSse(await res.text());
    expect(events.at(-1)!.data).toBe("[DONE]");
    const completion = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.data) as { completion?: string })
      .map((c) => c.completion ?? "")
      .join("");
    expect(completion).toBe(Array.from({ length: n }, (_, i) => text(i)).join(""));
  });
});
