import { gt, sql } from "drizzle-orm";
import { inject } from "vitest";
import { workers } from "@/lib/db/schema";
import { InferenceClient } from "@/lib/inference/client";
import { workerSecret } from "@/lib/internal-secret";
import { randomToken } from "@/lib/ids";
import { createDeployment } from "@/lib/services/deployments";
import { baseUrl, db, makeTeam, type TestTeam } from "./context";

export type TestDeployment = { id: string; name: string; path: string; url: string };

/** A deployment of the tiny model (the test worker serves it) in `team`. */
export async function makeDeployment(team: Pick<TestTeam, "id" | "slug">, name?: string): Promise<TestDeployment> {
  const dep = await createDeployment(db().db, {
    teamId: team.id,
    name: name ?? `d-${randomToken(8)}`,
    model: inject("tinyModel"),
  });
  const path = `/deployments/${team.slug}/${dep.name}`;
  return { id: dep.id, name: dep.name, path, url: baseUrl + path };
}

/** A fresh team with a deployment: every test gets its own world. */
export async function makeTeamWithDeployment() {
  const team = await makeTeam();
  return { team, dep: await makeDeployment(team) };
}

/** POST {deployment} with a model key. */
export async function complete(dep: TestDeployment, key: string, body: unknown) {
  const res = await fetch(dep.url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

export type SseEvent = { event: string; data: string };

/** Parses a whole server-sent-events body (as the spec's clients would see it). */
export function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split(/\n\n/)) {
    if (!block.trim()) continue;
    let event = "message";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    out.push({ event, data: data.join("\n") });
  }
  return out;
}

/** Sequences running or queued on every live worker, from their /health load figures. */
export async function busySequences(): Promise<number> {
  const rows = await db()
    .db.select()
    .from(workers)
    .where(gt(workers.heartbeatAt, sql`now() - interval '3 seconds'`));
  let busy = 0;
  for (const row of rows) {
    if (!row.address) continue;
    const health = await new InferenceClient({ url: row.address, secret: workerSecret() }).health().catch(() => null);
    for (const l of health?.load ?? []) busy += Number(l.running ?? 0) + Number(l.queued ?? 0);
  }
  return busy;
}

/** No EOS: generations run for their whole max_tokens (the tiny model's EOS is its last token). */
export async function noEosBias(): Promise<Record<string, number>> {
  const { readFile } = await import("node:fs/promises");
  const config = JSON.parse(await readFile(`${inject("tinyModel")}/config.json`, "utf8")) as { eos_token_id: number };
  return { [String(config.eos_token_id)]: -100 };
}
