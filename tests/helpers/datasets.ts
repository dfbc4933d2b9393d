import { expect } from "vitest";
import { DatasetSchema, DownloadResponse } from "@/lib/contracts/datasets";
import type { client } from "./context";

type Api = ReturnType<typeof client>;
export const Dataset = DatasetSchema.strict();

export async function waitForStatus(api: Api, id: string, status: string, timeout = 30_000) {
  await expect.poll(async () => (await api.get(`/v1/datasets/${id}`)).json.status, { timeout }).toBe(status);
  return Dataset.parse((await api.get(`/v1/datasets/${id}`)).json);
}

/** The bytes of a dataset's file, through the signed URL the API hands out (`split` names one). */
export async function downloadBytes(api: Api, id: string, split?: string): Promise<Buffer> {
  const res = await api.get(`/v1/datasets/${id}/download${split ? `?split=${split}` : ""}`);
  expect(res.status, JSON.stringify(res.json)).toBe(200);
  const { url, expiresAt } = DownloadResponse.strict().parse(res.json);
  expect(new Date(expiresAt).getTime()).toBeGreaterThan(Date.now());
  const file = await fetch(url);
  expect(file.status).toBe(200);
  return Buffer.from(await file.arrayBuffer());
}

/** The downloaded file's text. */
export async function download(api: Api, id: string): Promise<string> {
  return (await downloadBytes(api, id)).toString("utf8");
}

/** JSONL text as values; every line (the last included) ends with a newline. */
export function parseLines(text: string): unknown[] {
  expect(text === "" || text.endsWith("\n")).toBe(true);
  return text === ""
    ? []
    : text
        .slice(0, -1)
        .split("\n")
        .map((l) => JSON.parse(l));
}
