import { describe, expect, it } from "vitest";
import { signedUrl } from "@/lib/signing";
import { sampleContentPath } from "@/lib/services/samples";
import { client, makeTeam } from "../helpers/context";

async function oneSample() {
  const api = client((await makeTeam()).apiKey);
  const p = (await api.post("/v1/pipelines/create", { name: "p" })).json;
  const messages = [{ role: "user", content: "the secret text" }];
  const { id } = (await api.post(`/v1/pipelines/${p.id}/add`, { messages })).json;
  const [sample] = (await api.post(`/v1/pipelines/${p.id}/samples`, {})).json;
  return { id, url: sample.url as string, messages };
}

async function expectForbidden(url: string, reason: RegExp) {
  const res = await fetch(url);
  const text = await res.text();
  expect(res.status, url).toBe(403);
  expect(text).not.toContain("the secret text");
  expect(JSON.parse(text).error).toMatchObject({ type: "forbidden", message: expect.stringMatching(reason) });
}

describe("signed sample URLs", () => {
  it("need no other credential and expire after the configured hour", async () => {
    const { url, messages } = await oneSample();
    const parsed = new URL(url);
    const expires = Number(parsed.searchParams.get("expires"));
    expect(expires * 1000 - Date.now()).toBeGreaterThan(3590_000);
    expect(expires * 1000 - Date.now()).toBeLessThanOrEqual(3600_000);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(messages);
    // Never kept by a browser: a deleted sample is gone at once.
    expect(res.headers.get("cache-control")).toBe("private, no-store");
  });

  it("refuse a tampered signature, expiry or sample id", async () => {
    const { url } = await oneSample();
    const other = await oneSample();
    const u = new URL(url);
    const sig = u.searchParams.get("signature")!;

    const badSig = new URL(url);
    badSig.searchParams.set("signature", (sig[0] === "a" ? "b" : "a") + sig.slice(1));
    await expectForbidden(badSig.toString(), /invalid/);

    const laterExpiry = new URL(url);
    laterExpiry.searchParams.set("expires", String(Number(u.searchParams.get("expires")) + 3600));
    await expectForbidden(laterExpiry.toString(), /invalid/);

    const otherSample = new URL(url);
    otherSample.pathname = sampleContentPath(other.id);
    await expectForbidden(otherSample.toString(), /invalid/);

    const unsigned = new URL(url);
    unsigned.search = "";
    await expectForbidden(unsigned.toString(), /missing or invalid/);
  });

  it("refuse an expired URL", async () => {
    const { id } = await oneSample();
    await expectForbidden(signedUrl(sampleContentPath(id), -1), /expired/);
  });
});
