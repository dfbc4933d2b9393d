// Keeps the worker's models loaded: every (model, dtype) of the deployments table (and
// WORKER_MODELS, dtype auto) is loaded as soon as the worker learns of it, not at its first
// request, and each one's state (downloading with bytes, loading, ready, failed with the reason)
// is published in the registry, where the app reads it: the dashboard and the API show it, and
// requests get a 503 with Retry-After while a model downloads instead of waiting for it. A
// deployed model that WORKER_SERVES leaves to other workers is published as `excluded`.
import { servedModelKey, teamModelKey, type DtypeChoice, type ModelState } from "@/lib/contracts/models";
import type { Engine } from "./engine/engine";
import { isEngineError } from "./engine/errors";
import type { LoadProgress } from "./engine/model/progress";
import { logger } from "@/lib/observe/log";

export type Served = {
  model: string;
  dtype: DtypeChoice;
  /**
   * The keys its state is published under: servedModelKey (the default), or one teamModelKey per
   * team where WORKER_SERVES places teams (the app then routes only those teams' requests here).
   */
  keys?: string[];
};

/** A deployed model's key that this worker leaves to others (WORKER_SERVES), and what to log. */
export type Excluded = { key: string; what: string };

const loadKey = (w: Served) => servedModelKey(w.model, w.dtype);

/** Publishes the ready keys and every state; called at most every `publishMs` while loading. */
export type Publish = (ready: string[], states: Record<string, ModelState>) => Promise<void>;

/**
 * A failed load is tried again after a minute, then after 2, 4, 8… minutes, at most every hour:
 * a graph the engine cannot serve builds a whole onnxruntime session before it fails, and every
 * minute that cost (memory, a core) slowed the other models' streams, for as long as it stayed
 * deployed. A hub that came back, freed disk, or a fixed repository are still picked up.
 */
const RETRY_FAILED_MS = 60_000;
const RETRY_FAILED_MAX_MS = 60 * 60_000;
export const retryDelayMs = (failures: number) =>
  Math.min(RETRY_FAILED_MAX_MS, RETRY_FAILED_MS * 2 ** Math.max(0, failures - 1));

export class ModelSupervisor {
  /** Each wanted (model, dtype)'s state, by servedModelKey. */
  private states = new Map<string, ModelState>();
  /** The keys each wanted (model, dtype)'s state is published under. */
  private aliases = new Map<string, string[]>();
  /** Keys published as `excluded`, and since when. */
  private excluded = new Map<string, string>();
  /** The keys of the last sync: a load that ends after its key left them publishes nothing. */
  private wanted = new Set<string>();
  /** Each key's latest load: an earlier one (cancelled when its key left) publishes nothing. */
  private loads = new Map<string, object>();
  private failedAt = new Map<string, number>();
  /** Failed loads in a row, by key (reset by a load that succeeds, or when the key leaves). */
  private failures = new Map<string, number>();
  private publishing: Promise<void> | null = null;
  private dirty = false;
  private lastPublish = 0;

  constructor(
    private readonly engine: Engine,
    private readonly publish: Publish,
    private readonly publishMs = 1000,
    private readonly log: (line: string) => void = (line) => logger().info(line),
  ) {}

  /**
   * Follows the wanted set: loads what is new (and, after a minute, retries what failed).
   * `excluded`: deployed models this worker leaves to others (WORKER_SERVES), published as such.
   */
  sync(wanted: Served[], excluded: Excluded[] = []): void {
    this.engine.setModels([...new Set(wanted.map((w) => w.model))]);
    // What no deployment serves any more is unloaded once its running requests have finished.
    this.engine.retain(wanted, (model, dtype) => this.log(`[worker] ${model} (${dtype}) unloaded: no longer deployed`));
    const keys = new Set(wanted.map(loadKey));
    this.aliases = new Map();
    for (const w of wanted) {
      const key = loadKey(w);
      this.aliases.set(key, [...new Set([...(this.aliases.get(key) ?? []), ...(w.keys ?? [key])])]);
    }
    this.wanted = keys;
    for (const key of [...this.states.keys()])
      if (!keys.has(key)) {
        this.states.delete(key);
        this.failures.delete(key);
      }
    for (const w of wanted) {
      const key = loadKey(w);
      const s = this.states.get(key);
      const waited = Date.now() - (this.failedAt.get(key) ?? 0);
      const retry = s?.state === "failed" && waited > retryDelayMs(this.failures.get(key) ?? 1);
      if (!s || retry) this.load(w, key);
    }
    const advertised = new Set([...this.aliases.values()].flat());
    const left = new Map<string, string>();
    for (const e of excluded) {
      if (advertised.has(e.key) || left.has(e.key)) continue;
      left.set(e.key, this.excluded.get(e.key) ?? new Date().toISOString());
      if (!this.excluded.has(e.key))
        this.log(`[worker] ${e.what} left to other workers: WORKER_SERVES does not include it`);
    }
    this.excluded = left;
    this.changed(true);
  }

  /**
   * Whether a request for `model` in `dtype` from team `tenant` is this worker's to answer: the
   * (model, dtype) is wanted here under its plain key, or under `tenant`'s team key.
   */
  serves(model: string, dtype: DtypeChoice, tenant: string | undefined): boolean {
    const key = servedModelKey(model, dtype);
    const keys = this.aliases.get(key) ?? [];
    return keys.includes(key) || (tenant !== undefined && keys.includes(teamModelKey(key, tenant)));
  }

  /** What the worker serves now (the registry's `models`). */
  readyKeys(): string[] {
    return [...this.states].filter(([, s]) => s.state === "ready").flatMap(([k]) => this.aliases.get(k) ?? [k]);
  }

  /** Every published key's state: the wanted models' under their keys, and the excluded ones. */
  private published(): Record<string, ModelState> {
    const out: Record<string, ModelState> = {};
    for (const [key, s] of this.states) for (const k of this.aliases.get(key) ?? [key]) out[k] = s;
    for (const [key, at] of this.excluded) out[key] = { state: "excluded", at };
    return out;
  }

  private load(w: Served, key: string): void {
    const token = {};
    this.loads.set(key, token);
    const current = () => this.loads.get(key) === token && this.wanted.has(key);
    this.set(key, { state: "pending" });
    const progress = (p: LoadProgress) => {
      if (!current()) return;
      if (p.state === "downloading")
        this.set(key, { state: "downloading", dtype: p.dtype, done: p.done, total: p.total });
      else if (p.state === "loading") this.set(key, { state: "loading", dtype: p.dtype });
    };
    this.engine
      .load(w.model, w.dtype, progress)
      .then((m) => {
        if (!current()) return;
        this.failures.delete(key);
        const notes = m.info.servingNotes;
        this.set(key, { state: "ready", dtype: m.info.dtype, ...(notes.length ? { notes } : {}) }, true);
        this.log(`[worker] ${w.model} (${m.info.dtype}, ${m.info.layout}) ready${notes.map((n) => `; ${n}`).join("")}`);
      })
      .catch((err: unknown) => {
        if (!current()) return;
        const message = (err as Error)?.message ?? String(err);
        this.failedAt.set(key, Date.now());
        const failures = (this.failures.get(key) ?? 0) + 1;
        this.failures.set(key, failures);
        this.set(key, { state: "failed", error: message, reason: isEngineError(err) ? err.reason : undefined }, true);
        this.log(
          `[worker] ${w.model} (${w.dtype}) failed to load: ${message} (tried again in ${retryDelayMs(failures) / 60_000} min)`,
        );
      });
  }

  private set(key: string, state: Omit<ModelState, "at">, now = false): void {
    this.states.set(key, { ...state, at: new Date().toISOString() });
    this.changed(now);
  }

  /** Publishes now (state changes) or at most every publishMs (download progress). */
  private changed(now: boolean): void {
    this.dirty = true;
    if (this.publishing) return;
    const wait = now ? 0 : Math.max(0, this.lastPublish + this.publishMs - Date.now());
    this.publishing = new Promise<void>((r) => setTimeout(r, wait).unref())
      .then(async () => {
        while (this.dirty) {
          this.dirty = false;
          this.lastPublish = Date.now();
          await this.publish(this.readyKeys(), this.published());
        }
      })
      .catch((err: unknown) => logger().error({ err }, "publishing model states failed"))
      .finally(() => {
        this.publishing = null;
      });
  }

  /** Resolves once nothing is waiting to be published (tests, shutdown). */
  async flush(): Promise<void> {
    while (this.publishing) await this.publishing;
  }
}
