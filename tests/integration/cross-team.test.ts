import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import {
  apiKeys,
  datasets,
  deployments,
  imports,
  memberships,
  pipelines,
  samples,
  teamInvites,
  teams,
} from "@/lib/db/schema";
import { createApiKey } from "@/lib/services/api-keys";
import { createDataset } from "@/lib/services/datasets";
import { createInvite } from "@/lib/services/members";
import { insertUser } from "@/lib/services/users";
import { baseUrl, client, db, makeTeam } from "../helpers/context";
import { makeDeployment } from "../helpers/deployments";
import { newUser } from "../helpers/session";

/**
 * Every route and method of the app, found by walking app/ and pages/ (so a new route is swept
 * without editing this test), is called with team B's credentials against team A's ids. Each
 * answer must be exactly what an unknown id gets, must not mention any of A's ids, and nothing of
 * A's may change.
 */
const root = path.resolve(import.meta.dirname, "../..");
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

type Route = { pattern: string; methods: string[]; file: string };

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

function routes(): Route[] {
  const out: Route[] = [];
  for (const file of walk(path.join(root, "app"))) {
    const rel = path.relative(path.join(root, "app"), file);
    const isRoute = rel.endsWith("route.ts");
    if (!isRoute && !rel.endsWith("page.tsx")) continue;
    const segments = path
      .dirname(rel)
      .split(path.sep)
      .filter((s) => s !== "." && !/^\(.*\)$/.test(s)); // route groups are not in the URL
    const pattern = "/" + segments.join("/");
    const text = readFileSync(file, "utf8");
    const methods = isRoute
      ? METHODS.filter((m) => new RegExp(`export (const|async function|function) ${m}\\b`).test(text))
      : ["GET"];
    out.push({ pattern: pattern === "/" ? "/" : pattern, methods, file: rel });
  }
  for (const file of walk(path.join(root, "pages/api"))) {
    // Pages Router API routes are served at their /v1 paths through next.config.mjs's rewrites.
    const rel = path.relative(path.join(root, "pages/api"), file).replace(/\.ts$/, "");
    const text = readFileSync(file, "utf8");
    const methods = METHODS.filter((m) => text.includes(`method: "${m}"`));
    out.push({ pattern: "/" + rel.split(path.sep).join("/"), methods, file: `pages/api/${rel}` });
  }
  return out;
}

type World = Record<string, string>;

/** The value of a route parameter: `[id]` after `pipelines` is a pipeline id, and so on. */
function fill(pattern: string, ids: World, file: string): string {
  const parts = pattern.split("/");
  return parts
    .map((seg, i) => {
      const m = /^\[(\.\.\.)?(\w+)\]$/.exec(seg);
      if (!m) return seg;
      const key = `${parts[i - 1]}/${m[2]}`;
      const value = ids[key] ?? ids[m[2]!];
      if (value === undefined)
        throw new Error(`${file}: no id of team A for ${seg} after '${parts[i - 1]}'; extend fill()`);
      return value;
    })
    .join("/");
}

/** Bodies that are valid apart from the ids, so the team check is what answers. */
function body(pattern: string, ids: World): unknown {
  if (pattern.endsWith("/add")) return { messages: [{ role: "user", content: "from team B" }] };
  if (pattern.endsWith("/add-batch")) return { samples: [{ messages: [{ role: "user", content: "from team B" }] }] };
  if (pattern.endsWith("/delete-samples")) return { all: true };
  if (pattern === "/v1/pipelines/[id]") return { name: "renamed by team B", retentionDays: 1 };
  if (pattern.endsWith("/create-dataset")) return { name: "stolen" };
  if (pattern.endsWith("/chat/completions")) return { model: ids.model, messages: [{ role: "user", content: "hi" }] };
  if (pattern === "/v1/completions") return { model: ids.model, prompt: "hi", max_tokens: 1 };
  if (pattern.startsWith("/deployments/")) return { prompt: "hi", max_tokens: 1 };
  if (pattern === "/api/ui/team") return { teamId: ids.teamId };
  if (pattern === "/api/ui/keys") return { kind: "model", deploymentId: ids.deploymentId };
  return {};
}

async function snapshot(teamId: string) {
  const rows = await Promise.all([
    db().db.select().from(teams).where(eq(teams.id, teamId)),
    db().db.select().from(pipelines).where(eq(pipelines.teamId, teamId)),
    db().db.select().from(samples).where(eq(samples.teamId, teamId)),
    db().db.select().from(datasets).where(eq(datasets.teamId, teamId)),
    db().db.select({ id: apiKeys.id, revokedAt: apiKeys.revokedAt }).from(apiKeys).where(eq(apiKeys.teamId, teamId)),
    db().db.select().from(deployments).where(eq(deployments.teamId, teamId)),
    db().db.select().from(imports).where(eq(imports.teamId, teamId)),
    db().db.select().from(memberships).where(eq(memberships.teamId, teamId)),
    db().db.select().from(teamInvites).where(eq(teamInvites.teamId, teamId)),
  ]);
  return JSON.stringify(rows);
}

describe("cross-team sweep", () => {
  it("answers team B on every route about team A's ids as if they did not exist, and writes nothing", async () => {
    // Team A's world.
    const a = await makeTeam();
    const apiA = client(a.apiKey);
    const pipelineId = (await apiA.post("/v1/pipelines/create", { name: "team A pipeline" })).json.id as string;
    const sampleId = (
      await apiA.post(`/v1/pipelines/${pipelineId}/add`, { messages: [{ role: "user", content: "A" }] })
    ).json.id as string;
    const dataset = await createDataset(db().db, { teamId: a.id, pipelineId, name: "team-a-data", selection: {} });
    const importId = (
      await apiA.post(`/v1/pipelines/${pipelineId}/import`, '{"messages":[{"role":"user","content":"imported"}]}\n', {
        "content-type": "application/x-ndjson",
      })
    ).json.id as string;
    const deployment = await makeDeployment(a);
    const modelKeyA = await createApiKey(db().db, { teamId: a.id, kind: "model" });
    const ownerA = await insertUser(
      db().db,
      { email: `a-owner-${Date.now().toString(36)}@example.com`, name: null, passwordHash: "unused" },
      { teamId: a.id, role: "owner" },
    );
    const inviteA = await createInvite(db().db, { teamId: a.id, role: "member", createdBy: ownerA.id });
    const real: World = {
      "pipelines/id": pipelineId,
      "samples/id": sampleId,
      "imports/id": importId,
      "datasets/id": dataset.id,
      "keys/id": modelKeyA.key.id,
      "deployments/name": deployment.name,
      "deployments/team": a.slug,
      team: a.slug,
      name: deployment.name,
      "blobs/key": `datasets/${dataset.id}/x/team-a-data.jsonl`,
      "v1/path": `pipelines/${pipelineId}/nope`,
      "auth/nextauth": "session",
      model: `${a.slug}/${deployment.name}`,
      teamId: a.id,
      deploymentId: deployment.id,
      "members/userId": ownerA.id,
      "invites/id": inviteA.invite.id,
      "invite/token": inviteA.token,
    };
    // The same shapes, naming nothing that exists.
    const unknown: World = {
      ...real,
      "pipelines/id": "pipe_00000000000000000000",
      "samples/id": "smp_00000000000000000000",
      "imports/id": "imp_00000000000000000000",
      "datasets/id": "data_00000000000000000000",
      "keys/id": "key_00000000000000000000",
      "deployments/name": "no-such-deployment",
      name: "no-such-deployment",
      "blobs/key": "datasets/data_00000000000000000000/x/none.jsonl",
      "v1/path": "pipelines/pipe_00000000000000000000/nope",
      model: `${a.slug}/no-such-deployment`,
      teamId: "team_00000000000000000000",
      deploymentId: "dep_00000000000000000000",
      "members/userId": "usr_00000000000000000000",
      "invites/id": "inv_00000000000000000000",
      "invite/token": `lmp_inv_${"0".repeat(43)}`,
    };
    const secrets = [
      a.id,
      pipelineId,
      sampleId,
      dataset.id,
      importId,
      deployment.id,
      modelKeyA.key.id,
      "team A pipeline",
      ownerA.id,
      ownerA.email,
      inviteA.invite.id,
    ];

    // Team B: an owner signed in to the dashboard, with an API key and a model key.
    const b = await newUser("Team B");
    const teamB = (await db().db.select().from(teams).where(eq(teams.id, b.team.id)))[0]!;
    const apiKeyB = (await createApiKey(db().db, { teamId: teamB.id, kind: "api" })).secret;
    const modelKeyB = (await createApiKey(db().db, { teamId: teamB.id, kind: "model" })).secret;
    const credentials = (pattern: string): Record<string, string> =>
      pattern.startsWith("/v1/")
        ? { authorization: `Bearer ${apiKeyB}` }
        : pattern.startsWith("/deployments/")
          ? { authorization: `Bearer ${modelKeyB}` }
          : { cookie: b.cookie, "sec-fetch-site": "same-origin", origin: baseUrl };

    // The suite's worker packages A's dataset: let it finish, so the snapshot holds still.
    await expect
      .poll(async () => (await apiA.get(`/v1/datasets/${dataset.id}`)).json.status, { timeout: 30_000 })
      .toBe("READY");
    await expect
      .poll(async () => (await apiA.get(`/v1/imports/${importId}`)).json.status, { timeout: 30_000 })
      .toBe("READY");
    const before = await snapshot(a.id);
    const all = routes();
    expect(all.length).toBeGreaterThan(30);
    let swept = 0;
    for (const route of all) {
      if (route.pattern.startsWith("/api/auth") || route.pattern.startsWith("/api/health")) continue; // no team data
      for (const method of route.methods) {
        const call = async (ids: World) => {
          const url = fill(route.pattern, ids, route.file);
          const sent = url + (method === "GET" ? "" : JSON.stringify(body(route.pattern, ids)));
          const res = await fetch(baseUrl + url, {
            method,
            redirect: "manual",
            headers: { ...credentials(route.pattern), "content-type": "application/json" },
            body: method === "GET" ? undefined : JSON.stringify(body(route.pattern, ids)),
          });
          const text = await res.text();
          let json: { error?: { type?: string; param?: string } } | undefined;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          return { status: res.status, type: json?.error?.type, param: json?.error?.param, text, sent };
        };
        const [onReal, onUnknown] = [await call(real), await call(unknown)];
        const what = `${method} ${route.pattern} (${route.file})`;
        expect({ status: onReal.status, type: onReal.type, param: onReal.param }, what).toEqual({
          status: onUnknown.status,
          type: onUnknown.type,
          param: onUnknown.param,
        });
        // (Pages and messages echo what was asked for: an id B sent is not one B learned.)
        for (const s of secrets.filter((x) => !onReal.sent.includes(x)))
          expect(onReal.text.includes(s), `${what} mentions ${s}`).toBe(false);
        swept++;
      }
    }
    expect(swept).toBeGreaterThan(30);
    expect(await snapshot(a.id)).toBe(before);
    // And team A's world still works for team A.
    expect((await apiA.post(`/v1/pipelines/${pipelineId}/count`, {})).json).toEqual({ count: 2 });
    expect(
      (await db().db.execute(sql`select 1 from api_keys where id = ${modelKeyA.key.id} and revoked_at is null`)).length,
    ).toBe(1);
  }, 120_000);
});
