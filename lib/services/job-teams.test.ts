// A worker placed on teams (WORKER_SERVES=team:acme, or !team:acme) takes only the dataset and
// import jobs of the teams it serves.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobTeams, parsePlacements } from "../contracts/placement";
import { startFeedWorld } from "../db/throwaway";
import { claimDataset } from "./dataset-jobs";
import { createDataset } from "./datasets";
import { createPipeline } from "./pipelines";
import { createTeam } from "./teams";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
beforeAll(async () => {
  world = await startFeedWorld("jobteams");
}, 60_000);
afterAll(() => world?.close());

describe("jobTeams", () => {
  it("reads whose jobs a worker takes from its placements", () => {
    expect(jobTeams(parsePlacements(undefined))).toEqual({ only: null, except: [] });
    expect(jobTeams(parsePlacements("team:acme,team:beta"))).toEqual({ only: ["acme", "beta"], except: [] });
    expect(jobTeams(parsePlacements("!team:acme"))).toEqual({ only: null, except: ["acme"] });
    // Models by name (for any team): any team's jobs, but those of the teams left out.
    expect(jobTeams(parsePlacements("Qwen/*,team:acme,!team:beta"))).toEqual({ only: null, except: ["beta"] });
  });
});

describe("claims", () => {
  it("take only the jobs of the teams a worker serves", async () => {
    const { db } = world.app;
    await db.execute(sql`update datasets set deleted_at = now() where deleted_at is null`);
    const made: Record<string, string> = {};
    for (const slug of [`acme-${Date.now().toString(36)}`, `beta-${Date.now().toString(36)}`]) {
      const team = await createTeam(db, { slug });
      const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
      made[slug.split("-")[0]!] = slug;
      await createDataset(db, { teamId: team.id, pipelineId: pipeline.id, name: slug, selection: {} });
    }
    const claim = (teams: ReturnType<typeof jobTeams>) => claimDataset(db, { owner: "w", leaseSeconds: 60, teams });
    expect(await claim({ only: ["nobody"], except: [] })).toBeUndefined();
    expect((await claim({ only: null, except: [made.acme!] }))?.name).toBe(made.beta);
    expect(await claim({ only: null, except: [made.acme!] })).toBeUndefined(); // beta's is taken
    expect((await claim({ only: [made.acme!], except: [] }))?.name).toBe(made.acme);
  });

  it("take turns between teams: one team's long queue does not hold another team's one dataset back", async () => {
    const { db } = world.app;
    await db.execute(sql`update datasets set deleted_at = now() where deleted_at is null`);
    const names: string[] = [];
    const make = async (slug: string, n: number) => {
      const team = await createTeam(db, { slug: `${slug}-${Date.now().toString(36)}` });
      const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
      for (let i = 0; i < n; i++)
        await createDataset(db, { teamId: team.id, pipelineId: pipeline.id, name: `${slug}${i}`, selection: {} });
    };
    await make("a", 4);
    await make("b", 1);
    // One worker: it packages one dataset at a time, and each ends before the next claim.
    for (;;) {
      const job = await claimDataset(db, { owner: "w", leaseSeconds: 60 });
      if (!job) break;
      names.push(job.name);
      await db.execute(sql`update datasets set status = 'READY', lease_owner = null where id = ${job.id}`);
    }
    expect(names).toEqual(["a0", "b0", "a1", "a2", "a3"]); // before: a0, a1, a2, a3, b0
  });
});
