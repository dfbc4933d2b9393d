// Generation events in groups: those that arrived in one network read. A relay that takes a group
// at a time sends it as one write (one SSE chunk to the client), instead of one per event, so
// when the source is ahead of the app (a fast upstream, a busy app) the app does less work per
// token rather than falling further behind. Nothing is held back to make a group: a group is
// whatever had arrived, a single event included.
import type { GenerationStreamEvent, GenerationUsage } from "../contracts/generation";

/** Events, one at a time as any AsyncIterable, or (where the source groups them) `batches()`. */
export type GenerationEvents = AsyncIterable<GenerationStreamEvent> & {
  /** The same events, each group non-empty and in order; to be taken once, instead of iterating. */
  readonly batches?: () => AsyncIterable<GenerationStreamEvent[]>;
  /**
   * What the generation has used so far, for a stream its client left before the end (the
   * upstreams: what they reported, or the tokens streamed).
   */
  readonly used?: () => GenerationUsage;
};

/** Events made of groups: iterated one by one, or group by group through `eventBatches`. */
export function batchedEvents(groups: AsyncIterable<GenerationStreamEvent[]>): GenerationEvents {
  return {
    batches: () => groups,
    async *[Symbol.asyncIterator]() {
      for await (const group of groups) yield* group;
    },
  };
}

/** The groups of `events`: its own where it has them, else one group per event. */
export function eventBatches(events: AsyncIterable<GenerationStreamEvent>): AsyncIterable<GenerationStreamEvent[]> {
  const batches = (events as GenerationEvents).batches;
  if (batches) return batches();
  return (async function* () {
    for await (const e of events) yield [e];
  })();
}
