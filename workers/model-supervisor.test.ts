// The supervisor publishes each wanted model's state; a load that ends after its deployment left,
// or that a newer load replaced, publishes nothing.
import { describe, expect, it, vi } from "vitest";
import type { ModelState } from "@/lib/contracts/models";
import type { Engine } from "./engine/engine";
import { loadError } from "./engine/errors";
import { ModelSupervisor, retryDelayMs } from "./model-supervisor";

/** An engine whose loads the test settles by hand. */
function fakeEngine() {
  const loads: { model: string; resolve: (m: unknown) => void; reject: (e: unknown) => void }[] = [];
  const retained: string[][] = [];
  const engine = {
    setModels: () => {},
    retain: (keep: { model: string; dtype: string }[]) => retained.push(keep.map((k) => `${k.model}#${k.dtype}`)),
    load: (model: string) =>
      new Promise((resolve, reject) => {
        loads.push({ model, resolve, reject });
      }),
  };
  return { engine: engine as unknown as Engine, loads, retained };
}

const loaded = { info: { dtype: "fp32", layout: "padded", servingNotes: [] } };

describe("ModelSupervisor", () => {
  it("ignores a cancelled load when the deployment came back meanwhile, and publishes the new one", async () => {
    const { engine, loads, retained } = fakeEngine();
    let states: Record<string, ModelState> = {};
    const supervisor = new ModelSupervisor(
      engine,
      async (_ready, s) => void (states = s),
      0,
      () => {},
    );
    const a = { model: "org/a", dtype: "fp32" as const };

    supervisor.sync([a]);
    supervisor.sync([]); // deleted: the engine is told to keep nothing
    expect(retained.at(-1)).toEqual([]);
    supervisor.sync([a]); // created again: a second load
    expect(loads).toHaveLength(2);

    loads[0]!.reject(loadError("cancelled", "the model is no longer deployed"));
    await supervisor.flush();
    await new Promise((r) => setTimeout(r, 10));
    await supervisor.flush();
    expect(states["org/a#fp32"]?.state).toBe("pending");

    loads[1]!.resolve(loaded);
    await new Promise((r) => setTimeout(r, 10));
    await supervisor.flush();
    expect(states["org/a#fp32"]?.state).toBe("ready");
    expect(supervisor.readyKeys()).toEqual(["org/a#fp32"]);
  });

  it("tries a failed load again after 1, 2, 4… minutes (at most hourly), and from scratch once redeployed", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const { engine, loads } = fakeEngine();
      const lines: string[] = [];
      const supervisor = new ModelSupervisor(
        engine,
        async () => {},
        0,
        (l) => lines.push(l),
      );
      const c = [{ model: "org/c", dtype: "fp32" as const }];
      const fail = async () => {
        loads.at(-1)!.reject(loadError("unsupported_layout", "not a decoder"));
        await new Promise((r) => setImmediate(r));
      };
      const after = (minutes: number) => {
        vi.setSystemTime(Date.now() + minutes * 60_000 + 1);
        supervisor.sync(c);
        return loads.length;
      };
      supervisor.sync(c);
      await fail();
      expect(lines.at(-1)).toMatch(/failed to load: not a decoder \(tried again in 1 min\)/);
      expect(after(0.5)).toBe(1);
      expect(after(0.5)).toBe(2); // a minute after the first failure
      await fail();
      expect(after(1)).toBe(2); // now 2 minutes
      expect(after(1)).toBe(3);
      await fail();
      expect(after(3)).toBe(3); // 4 minutes
      expect(after(1)).toBe(4);
      expect(retryDelayMs(7)).toBe(60 * 60_000);
      expect(retryDelayMs(20)).toBe(60 * 60_000);
      // A deployment that leaves and comes back starts over: its next failure is retried after a minute.
      loads.at(-1)!.resolve(loaded);
      await new Promise((r) => setImmediate(r));
      supervisor.sync([]);
      supervisor.sync(c);
      await fail();
      expect(after(1)).toBe(6);
    } finally {
      vi.useRealTimers();
    }
  });

  it("publishes nothing for a load that ends after its deployment was deleted", async () => {
    const { engine, loads } = fakeEngine();
    let states: Record<string, ModelState> = {};
    const supervisor = new ModelSupervisor(
      engine,
      async (_ready, s) => void (states = s),
      0,
      () => {},
    );
    supervisor.sync([{ model: "org/b", dtype: "q4" }]);
    supervisor.sync([]);
    loads[0]!.resolve(loaded);
    await new Promise((r) => setTimeout(r, 10));
    await supervisor.flush();
    expect(states).toEqual({});
    expect(supervisor.readyKeys()).toEqual([]);
  });

  it("publishes a ready model's serving notes, and logs them", async () => {
    const { engine, loads } = fakeEngine();
    let states: Record<string, ModelState> = {};
    const lines: string[] = [];
    const supervisor = new ModelSupervisor(
      engine,
      async (_ready, s) => void (states = s),
      0,
      (l) => lines.push(l),
    );
    supervisor.sync([
      { model: "org/c", dtype: "q8" },
      { model: "org/d", dtype: "fp32" },
    ]);
    const note = "Concurrent requests run one pass each: row-wise quantization is off (WORKER_ROW_QUANTIZATION=off).";
    loads[0]!.resolve({ info: { dtype: "q8", layout: "exact-length", servingNotes: [note] } });
    loads[1]!.resolve(loaded);
    await new Promise((r) => setTimeout(r, 10));
    await supervisor.flush();
    expect(states["org/c#q8"]).toMatchObject({ state: "ready", notes: [note] });
    expect(states["org/d#fp32"]).not.toHaveProperty("notes");
    expect(lines).toContain(`[worker] org/c (q8, exact-length) ready; ${note}`);
  });

  it("publishes the models WORKER_SERVES leaves out as excluded, never loads them, and forgets them once undeployed", async () => {
    const { engine, loads, retained } = fakeEngine();
    let states: Record<string, ModelState> = {};
    let ready: string[] = [];
    const lines: string[] = [];
    const supervisor = new ModelSupervisor(
      engine,
      async (r, s) => void ((ready = r), (states = s)),
      0,
      (l) => lines.push(l),
    );
    const mine = { model: "org/a", dtype: "q4" as const };
    const theirs = { model: "big/b", dtype: "fp32" as const };
    const left = { key: "big/b#fp32", what: "big/b (fp32)" };
    supervisor.sync([mine], [left]);
    supervisor.sync([mine], [left]); // every heartbeat: no second log line
    expect(loads.map((l) => l.model)).toEqual(["org/a"]);
    expect(retained.at(-1)).toEqual(["org/a#q4"]);
    loads[0]!.resolve(loaded);
    await new Promise((r) => setTimeout(r, 10));
    await supervisor.flush();
    expect(states["big/b#fp32"]?.state).toBe("excluded");
    expect(ready).toEqual(["org/a#q4"]);
    expect(lines.filter((l) => l.includes("big/b"))).toEqual([
      "[worker] big/b (fp32) left to other workers: WORKER_SERVES does not include it",
    ]);
    // The same model in a dtype this worker serves (also WORKER_MODELS) is loaded, not excluded.
    supervisor.sync([mine, theirs], [left]);
    expect(loads.map((l) => l.model)).toEqual(["org/a", "big/b"]);
    await supervisor.flush();
    expect(states["big/b#fp32"]?.state).toBe("pending");
    supervisor.sync([mine], []); // undeployed
    await supervisor.flush();
    expect(Object.keys(states)).toEqual(["org/a#q4"]);
  });

  it("publishes a model served for some teams under their keys, and ready for those alone", async () => {
    const { engine, loads } = fakeEngine();
    let states: Record<string, ModelState> = {};
    let ready: string[] = [];
    const supervisor = new ModelSupervisor(
      engine,
      async (r, s) => void ((ready = r), (states = s)),
      0,
      () => {},
    );
    // WORKER_SERVES=team:a (two of team a's deployments share the model) and WORKER_MODELS=org/x.
    supervisor.sync(
      [
        { model: "org/m", dtype: "q4", keys: ["org/m#q4|team:a"] },
        { model: "org/m", dtype: "q4", keys: ["org/m#q4|team:a"] },
        { model: "org/x", dtype: "auto" },
      ],
      [{ key: "org/m#q4|team:b", what: "org/m (q4) for team b" }],
    );
    expect(loads.map((l) => l.model)).toEqual(["org/m", "org/x"]); // loaded once
    loads[0]!.resolve(loaded);
    loads[1]!.resolve(loaded);
    await new Promise((r) => setTimeout(r, 10));
    await supervisor.flush();
    expect(ready.sort()).toEqual(["org/m#q4|team:a", "org/x#auto"]);
    expect(Object.fromEntries(Object.entries(states).map(([k, s]) => [k, s.state]))).toEqual({
      "org/m#q4|team:a": "ready",
      "org/m#q4|team:b": "excluded",
      "org/x#auto": "ready",
    });
    // What its server takes: team a's requests for org/m in q4, anyone's for org/x (auto).
    expect(supervisor.serves("org/m", "q4", "a")).toBe(true);
    expect(supervisor.serves("org/m", "q4", "b")).toBe(false);
    expect(supervisor.serves("org/m", "q4", undefined)).toBe(false);
    expect(supervisor.serves("org/m", "fp32", "a")).toBe(false); // another dtype would load here
    expect(supervisor.serves("org/x", "auto", "b")).toBe(true);
    expect(supervisor.serves("org/x", "auto", undefined)).toBe(true);
    expect(supervisor.serves("org/y", "auto", "a")).toBe(false);
    // Team a's deployments leave: its requests are turned away at once.
    supervisor.sync([{ model: "org/x", dtype: "auto" }]);
    expect(supervisor.serves("org/m", "q4", "a")).toBe(false);
  });
});
