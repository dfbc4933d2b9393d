import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AddSampleInput, Selection } from "../contracts/pipelines";
import { connect } from "../db/client";
import { startFeedWorld } from "../db/throwaway";
import { newId } from "../ids";
import { createPipeline } from "./pipelines";
import { insertSampleRows, newSampleRow } from "./sample-rows";
import { addSample, resolveCursor, streamSelection } from "./samples";
import { createTeam } from "./teams";

let world: Awaited<ReturnType<typeof startFeedWorld>>;
beforeAll(async () => {
  world = await startFeedWorld("samples");
}, 60_000);
afterAll(() => world?.close());

const text = (content: string): AddSampleInput => ({
  messages: [{ role: "user", content }],
  userId: undefined,
  groupId: undefined,
  metadata: undefined,
});

describe("paging a pipeline with `after` while samples are added", () => {
  it("never passes a sample that commits after a later one (an import chunk, an add-batch)", async () => {
    const { db } = world.app;
    const team = await createTeam(db, { slug: `t-${Math.random().toString(36).slice(2, 10)}` });
    const pipeline = await createPipeline(db, { teamId: team.id, name: "p" });
    const page = async (after?: string) => {
      const cursor = await resolveCursor(db, pipeline.id, after);
      const ids: string[] = [];
      const selection = {} as Selection;
      for await (const s of streamSelection(db, { pipelineId: pipeline.id, selection, cursor })) ids.push(s.id);
      return ids;
    };
    const first = (await addSample(db, { teamId: team.id, pipelineId: pipeline.id, sample: text("first") })).id;

    // A long write (another process) takes its created_at, then commits only after a single add.
    const slowId = newId("sample");
    let inserted!: () => void;
    let release!: () => void;
    const wrote = new Promise<void>((r) => (inserted = r));
    const held = new Promise<void>((r) => (release = r));
    const writer = connect(world.url); // another app process
    const slow = writer.sql.begin(async (tx) => {
      await insertSampleRows(tx, [newSampleRow(slowId, pipeline.id, team.id, text("slow"))]);
      inserted();
      await held;
    });
    await wrote;
    const fast = (await addSample(db, { teamId: team.id, pipelineId: pipeline.id, sample: text("fast") })).id;

    // The client's page: "fast" is committed but behind the write in flight, so it waits too.
    // Before, the page held it, the client's cursor moved past "slow", and "slow" never came.
    const page1 = await page();
    expect(page1).toEqual([first]);
    release();
    await slow;
    await writer.close();
    expect(await page(page1.at(-1))).toEqual([slowId, fast]);
  });
});
