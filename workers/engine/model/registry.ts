// Lazy cache of loaded models by id and dtype; a failed load is forgotten so it can be retried.
import { loadModel, type LoadedModel, type LoadModelOptions } from "./load-model";

export class ModelRegistry {
  private readonly models = new Map<string, { id: string; model: Promise<LoadedModel>; signal?: AbortSignal }>();

  get(id: string, opts: LoadModelOptions = {}): Promise<LoadedModel> {
    const key = keyOf(id, opts.dtype ?? "auto");
    let entry = this.models.get(key);
    if (entry?.signal?.aborted) {
      // A cancelled load is not waited for: a new one starts (a download resumes its partial
      // file). Should the cancelled one still finish, its model is released.
      void entry.model.then(
        (m) => m.dispose(),
        () => {},
      );
      entry = undefined;
    }
    if (!entry) {
      const created = { id, model: loadModel(id, opts), signal: opts.signal };
      entry = created;
      this.models.set(key, created);
      created.model.catch(() => {
        if (this.models.get(key) === created) this.models.delete(key);
      });
    }
    return entry.model;
  }

  /** Forgets the model loaded for (id, dtype) and releases its session (nothing may use it any more). */
  async release(id: string, dtype: string): Promise<void> {
    const key = keyOf(id, dtype);
    const entry = this.models.get(key);
    if (!entry) return;
    this.models.delete(key);
    await (await entry.model.catch(() => null))?.dispose();
  }

  /** Releases the model of (id, dtype) if its load was cancelled (a new load has not replaced it). */
  async releaseCancelled(id: string, dtype: string): Promise<void> {
    if (this.models.get(keyOf(id, dtype))?.signal?.aborted) await this.release(id, dtype);
  }

  loadedIds(): string[] {
    return [...new Set([...this.models.values()].map((e) => e.id))];
  }

  async dispose() {
    for (const e of this.models.values()) {
      const m = await e.model.catch(() => null);
      await m?.dispose();
    }
    this.models.clear();
  }
}

const keyOf = (id: string, dtype: string) => `${id}\u0000${dtype}`;
