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
 * batches as `maxBatch` and `maxWeight` allow, rather than the first ones alone.
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
  type Pending = { item: I; resolve: (o: O) => void; reject: (e: unknown) => void };
  let queue: Pending[] = [];
  let inFlight = 0;

  const flush = () => {
    while (inFlight < options.maxInFlight && queue.length > 0) {
      let n = 0;
      let weight = 0;
      while (n < queue.length && n < options.maxBatch) {
        weight += options.weight?.(queue[n]!.item) ?? 0;
        if (n > 0 && options.maxWeight !== undefined && weight > options.maxWeight) break;
        n++;
      }
      const batch = queue.slice(0, n);
      queue = queue.slice(n);
      inFlight++;
      run(batch.map((p) => p.item))
        .then((results) => {
          if (results.length !== batch.length) {
            throw new Error(`batch returned ${results.length} results for ${batch.length} items`);
          }
          batch.forEach((p, i) => {
            const r = results[i]!;
            if (r instanceof Error) p.reject(r);
            else p.resolve(r);
          });
        })
        .catch((err: unknown) => {
          if (!options.isolateFailures || batch.length === 1) return batch.forEach((p) => p.reject(err));
          for (const p of batch) {
            run([p.item]).then(
              ([r]) => (r instanceof Error ? p.reject(r) : p.resolve(r as O)),
              (e: unknown) => p.reject(e),
            );
          }
        })
        .finally(() => {
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
    const promises = items.map((item) => new Promise<O>((resolve, reject) => queue.push({ item, resolve, reject })));
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
