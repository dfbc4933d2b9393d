// A deployment's status from what the live workers report.
import { describe, expect, it } from "vitest";
import type { ModelState } from "../contracts/models";
import { stateOf } from "./deployment-state";
import type { LiveWorker } from "./inference-routing";

const worker = (id: string, states: Record<string, Omit<ModelState, "at">>): LiveWorker => ({
  id,
  address: `http://${id}`,
  models: Object.entries(states)
    .filter(([, s]) => s.state === "ready")
    .map(([k]) => k),
  modelStates: Object.fromEntries(Object.entries(states).map(([k, s]) => [k, { ...s, at: "2026-11-28T00:00:00Z" }])),
});
const d = { model: "org/m", dtype: "q8" as const, teamId: "team_a" };

describe("stateOf", () => {
  it("gives a ready model's serving notes as its message, and none when it has none", () => {
    const notes = [
      "Concurrent requests run one pass each: row-wise quantization is off (WORKER_ROW_QUANTIZATION=off).",
    ];
    expect(stateOf([worker("a", { "org/m#q8": { state: "ready", dtype: "q8", notes } })], d)).toEqual({
      state: "ready",
      dtype: "q8",
      progress: null,
      message: notes[0],
      reason: null,
    });
    expect(stateOf([worker("a", { "org/m#q8": { state: "ready", dtype: "q8" } })], d).message).toBeNull();
  });

  it("keeps a failure's message and reason, and the download's progress", () => {
    const failed = stateOf(
      [worker("a", { "org/m#q8": { state: "failed", error: "no such repo", reason: "not_found" } })],
      d,
    );
    expect(failed).toMatchObject({ state: "failed", message: "no such repo", reason: "not_found" });
    const downloading = stateOf([worker("a", { "org/m#q8": { state: "downloading", done: 25, total: 100 } })], d);
    expect(downloading).toMatchObject({
      state: "downloading",
      progress: { done: 25, total: 100, percent: 25 },
      message: null,
    });
  });

  it("says no worker serves the model only when every live worker leaves it out (WORKER_SERVES)", () => {
    const excluded = worker("a", { "org/m#q8": { state: "excluded" } });
    const unplaced = stateOf([excluded, worker("b", { "org/m#q8": { state: "excluded" } })], d);
    expect(unplaced).toMatchObject({ state: "pending", reason: "excluded", progress: null });
    expect(unplaced.message).toMatch(/No running worker serves this deployment's model \(org\/m\).*WORKER_SERVES/);
    // Another worker has not reported it yet (it may load it within a heartbeat): waiting for it.
    const waiting = stateOf([excluded, worker("b", {})], d);
    expect(waiting).toMatchObject({ state: "pending", reason: null, message: "Waiting for a worker to pick it up." });
    // Another worker loads it: its state, whatever the others leave out.
    expect(stateOf([excluded, worker("b", { "org/m#q8": { state: "loading" } })], d).state).toBe("loading");
    expect(stateOf([worker("b", { "org/m#q8": { state: "failed", error: "x" } }), excluded], d).state).toBe("failed");
  });

  it("reads a worker that places teams under the team's key: ready for its team, excluded for another", () => {
    // A worker dedicated to team_a (WORKER_SERVES=team:a) serving org/m, leaving team_b's out.
    const dedicated = worker("a", {
      "org/m#q8|team:team_a": { state: "ready", dtype: "q8" },
      "org/m#q8|team:team_b": { state: "excluded" },
    });
    expect(stateOf([dedicated], d).state).toBe("ready");
    const other = stateOf([dedicated], { ...d, teamId: "team_b" });
    expect(other).toMatchObject({ state: "pending", reason: "excluded" });
    // Beside a worker that serves every team: team_b's state is that worker's.
    const shared = worker("b", { "org/m#q8": { state: "loading" } });
    expect(stateOf([dedicated, shared], { ...d, teamId: "team_b" }).state).toBe("loading");
    // A third team that the dedicated worker has not heard of yet: waiting for a worker.
    expect(stateOf([dedicated], { ...d, teamId: "team_c" })).toMatchObject({ state: "pending", reason: null });
  });
});
