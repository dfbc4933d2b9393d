// A real browser's EventSource (Chromium) on a page of another origin streams from a deployment:
// the spec's example client, which puts the key in the query because it cannot send headers.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { chromium, type Browser } from "playwright-core";
import { chromiumLaunchOptions } from "../helpers/chromium";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { complete, makeTeamWithDeployment } from "../helpers/deployments";

let browser: Browser;
let page: Server;
let pageOrigin: string;

beforeAll(async () => {
  browser = await chromium.launch(chromiumLaunchOptions);
  // Another origin: same host, another port.
  page = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<!doctype html><title>client</title><p>example client</p>");
  });
  await new Promise<void>((r) => page.listen(0, "127.0.0.1", r));
  pageOrigin = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await browser?.close();
  // (Only when beforeAll got that far: a missing Chromium must fail fast, not hang here.)
  if (page) await new Promise((r) => page.close(r));
});

describe("a browser on another origin", () => {
  it("streams with EventSource (update events, then end) and POSTs with fetch", async () => {
    const { team, dep } = await makeTeamWithDeployment();
    const whole = (await complete(dep, team.modelKey, { prompt: "The old man", max_tokens: 20, temperature: 0 })).json;
    const expected = whole.result[0].completion as string;
    expect(new URL(dep.url).origin).not.toBe(pageOrigin);

    const tab = await browser.newPage();
    await tab.goto(pageOrigin);
    const url =
      `${dep.url}?text=${encodeURIComponent("The old man")}&length=20&temperature=0` +
      `&stop_sequences=${encodeURIComponent(JSON.stringify(["zzz"]))}` +
      `&authorization=${encodeURIComponent(`Bearer ${team.modelKey}`)}`;
    const streamed = await tab.evaluate(
      (src) =>
        new Promise<{ updates: string[]; end: string | null; error?: boolean }>((resolve) => {
          const es = new EventSource(src);
          const updates: string[] = [];
          es.addEventListener("update", (e) => updates.push(JSON.parse((e as MessageEvent).data).completion));
          es.addEventListener("end", (e) => {
            es.close();
            resolve({ updates, end: (e as MessageEvent).data });
          });
          es.onerror = () => {
            es.close();
            resolve({ updates, end: null, error: true });
          };
        }),
      url,
    );
    expect(streamed.error).toBeUndefined();
    expect(streamed.updates.length).toBeGreaterThan(1);
    expect(streamed.updates.join("")).toBe(expected);
    expect(JSON.parse(streamed.end!)).toMatchObject({ finish_reason: whole.result[0].finish_reason });

    // A cross-origin POST with an Authorization header needs the preflight to pass.
    const posted = await tab.evaluate(
      async ({ url, key }) => {
        const res = await fetch(url, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ prompt: "The old man", max_tokens: 20, temperature: 0 }),
        });
        return { status: res.status, body: await res.json() };
      },
      { url: dep.url, key: team.modelKey },
    );
    expect(posted.status).toBe(200);
    expect(posted.body.result[0].completion).toBe(expected);

    // A bad key: the EventSource fails at once, without any update.
    const denied = await tab.evaluate(
      (src) =>
        new Promise<{ updates: number; readyState: number }>((resolve) => {
          const es = new EventSource(src);
          let updates = 0;
          es.addEventListener("update", () => updates++);
          es.onerror = () => resolve({ updates, readyState: es.readyState });
        }),
      `${dep.url}?text=Hi&authorization=nope`,
    );
    expect(denied).toEqual({ updates: 0, readyState: 2 }); // CLOSED: a 401 is not retried
    await tab.close();
  });
});
