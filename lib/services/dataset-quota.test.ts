import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withQuerySlots } from "../limits/testing";
import { datasets } from "../db/schema";
import { startFeedWorld } from "../db/throwaway";
import { takeQuerySlot } from "../limits/team-queries";
import { createTeamDataset } from "./dataset-quota";
import { createPipeline } from "./pipelines";
import { createTeam } from "./teams";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
beforeAll(async () => {
  world = await startFeedWorld("dsquota");
}, 60_000);
afterAll(() => world?.close());

describe("a team's create-dataset", () => {
  withQuerySlots(2, 200);

  it("counts its selection as one of the team's selection queries: it waits its turn, then 429, creating nothing", async () => {
    const { db } = world.app;
    const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
    const input = { pipelineId: pipeline.id, name: "d", selection: { search: "anything" } };
    const held = [await takeQuerySlot(team.id), await takeQuerySlot(team.id)];
    await expect(createTeamDataset(db, team, input)).rejects.toMatchObject({
      status: 429,
      message: "Your team already has 2 selection queries running; retry when one ends.",
    });
    expect(await db.select().from(datasets)).toEqual([]);
    // Another team is not held back; this team's turn comes when a query ends.
    const other = await createTeam(db, { slug: `o-${Math.random().toString(36).slice(2, 10)}` });
    const otherPipeline = await createPipeline(db, { teamId: other.id, name: "p" });
    await createTeamDataset(db, other, { ...input, pipelineId: otherPipeline.id });
    const waiting = createTeamDataset(db, team, input);
    held[0]!();
    expect(await waiting).toMatchObject({ teamId: team.id, status: "PROCESSING", size: 0 });
    held[1]!();
    // Its slot is given back: two more run at once.
    const [a, b] = await Promise.all([takeQuerySlot(team.id), takeQuerySlot(team.id)]);
    a();
    b();
  });
});
