/**
 * Coalesces concurrent calls into batches, for statements that run on every request (`add`,
 * the key lookup). A call is sent at once when fewer than `maxInFlight` batches are running;
 * otherwise it waits for the next free slot together with everything else that arrived
 * meanwhile, and goes out in one statement with them. An idle server therefore adds no latency,
 * while a busy one pays one round trip, one parse and one commit per batch instead of per call.
 *
 * `run` gets the items in arrival order and returns one result per item, in the same order
 * (an Error in a slot fails that call alone). A rejected `run` fails every call of its batch,
 * unless `isolateFailures`: then each call of a failed batch is run again on its own, so one bad
 * item (one that makes the whole statement fail) fails only its own call, never its neighbours'.
 *
 * `.many(items)` queues several items at once (add-batch): they go out together in as few
 * batches as `maxBatch` and `maxWeight` allow, rather than the first ones alone, and those
 * batches run one after another, so that the rows keep the items' order (their created_at).
 */
export function createBatcher<I, O>(
  run: (items: I[]) => Promise<(O | Error)[]>,
  options: {
    maxInFlight: number;
    maxBatch: number;
    /** With `maxWeight`: a batch stops growing past this total (a single heavier item goes alone). */
    weight?: (item: I) => number;
    maxWeight?: number;
    isolateFailures?: boolean;
  },
): Batcher<I, O> {
  // `group`: the items of one `many` call, whose batches run one after another (see flush).
  type Pending = { item: I; resolve: (o: O) => void; reject: (e: unknown) => void; group?: symbol };
  let queue: Pending[] = [];
  let inFlight = 0;
  const busyGroups = new Set<symbol>();

  const settle = async (batch: Pending[]) => {
    try {
      const results = await run(batch.map((p) => p.item));
      if (results.length !== batch.length) {
        throw new Error(`batch returned ${results.length} results for ${batch.length} items`);
      }
      batch.forEach((p, i) => {
        const r = results[i]!;
        if (r instanceof Error) p.reject(r);
        else p.resolve(r);
      });
    } catch (err) {
      if (!options.isolateFailures || batch.length === 1) return batch.forEach((p) => p.reject(err));
      // One by one, in order: a `many` call's items keep their order (and created_at) here too.
      for (const p of batch) {
        try {
          const [r] = await run([p.item]);
          if (r instanceof Error) p.reject(r);
          else p.resolve(r as O);
        } catch (e) {
          p.reject(e);
        }
      }
    }
  };

  /**
   * Starts batches while slots are free, in arrival order, except that a batch takes none of the
   * items of a `many` call that has a batch running: its next batch waits for that one (so its
   * rows keep their order), and other callers' items go on around it.
   */
  const flush = () => {
    while (inFlight < options.maxInFlight && queue.length > 0) {
      const batch: Pending[] = [];
      const rest: Pending[] = [];
      let weight = 0;
      let i = 0;
      for (; i < queue.length; i++) {
        const p = queue[i]!;
        if (p.group && busyGroups.has(p.group)) {
          rest.push(p);
          continue;
        }
        const w = options.weight?.(p.item) ?? 0;
        const full =
          batch.length >= options.maxBatch ||
          (batch.length > 0 && options.maxWeight !== undefined && weight + w > options.maxWeight);
        if (full) break;
        weight += w;
        batch.push(p);
      }
      rest.push(...queue.slice(i));
      if (batch.length === 0) return; // all that waits belongs to groups with a batch running
      queue = rest;
      const groups = new Set(batch.flatMap((p) => (p.group ? [p.group] : [])));
      for (const g of groups) busyGroups.add(g);
      inFlight++;
      void settle(batch).finally(() => {
        for (const g of groups) busyGroups.delete(g);
        inFlight--;
        flush();
      });
    }
  };

  const one = (item: I) =>
    new Promise<O>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      flush();
    });
  const many = (items: I[]) => {
    const group = Symbol("many");
    const promises = items.map(
      (item) => new Promise<O>((resolve, reject) => queue.push({ item, resolve, reject, group })),
    );
    flush();
    return Promise.allSettled(promises);
  };
  return Object.assign(one, { many });
}

export type Batcher<I, O> = ((item: I) => Promise<O>) & {
  many: (items: I[]) => Promise<PromiseSettledResult<O>[]>;
};

/** One batcher per database client (a pool, or a transaction's connection). */
export function perClient<C extends object, F>(create: (client: C) => F): (client: C) => F {
  const made = new WeakMap<C, F>();
  return (client) => {
    let f = made.get(client);
    if (!f) made.set(client, (f = create(client)));
    return f;
  };
}
