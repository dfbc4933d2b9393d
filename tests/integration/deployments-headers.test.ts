// The headers every answer of a deployment endpoint carries, refusals included: the request id,
// CORS, and (once the key is known) its rate-limit state. The endpoint is a Pages Router API route
// behind a rewrite (lib/http/node-deployment-route.ts), which writes each of them itself.
import { describe, expect, it } from "vitest";
import { makeTeamWithDeployment } from "../helpers/deployments";

const post = (url: string, headers: Record<string, string>, body: string) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

function expectCommon(res: Response) {
  expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
  expect(res.headers.get("access-control-allow-origin")).toBe("*");
  expect(res.headers.get("access-control-expose-headers")).toBe("x-request-id");
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
  });
});
