import type { DatasetOptions, DatasetStats, InvalidReason, SplitName } from "@/lib/contracts/dataset-options";
import type { CopyRowBatch } from "@/lib/db/copy-binary";
import type { DatasetJob, RowColumns } from "@/lib/services/dataset-jobs";
import type { DatasetOutput } from "./dataset-output";
import { PackagingError } from "./errors";
import { PlainConversation } from "./plain-conversation";
import { openAiChatRefusal, SeenConversations, type Message } from "./sample-checks";
import { holdTightHeap } from "./tight-heap";
import { loadTokenCounter, TemplateRefusal, type TokenCounter } from "./token-counter";
import { TokenTally } from "./token-stats";

type Rows = (columns: RowColumns) => AsyncGenerator<CopyRowBatch>;

/**
 * A sample parsed in JavaScript from this size on leaves enough garbage that the rest of the job
 * runs with the heap held tight (tight-heap.ts).
 */
export const LARGE_PARSED_SAMPLE_BYTES = 1024 * 1024;

/** Whether packaging must look at each sample (otherwise every line goes out as it comes). */
export function needsRows(o: DatasetOptions): boolean {
  return o.split !== undefined || o.dedupe || o.validate !== undefined || !!o.tokenizer;
}

/**
 * Every sample, no option to apply: each row's line goes to the file as it is (the output
 * copies it, with its newline, into the batch it writes).
 */
export async function copyLines(options: DatasetOptions, rows: Rows, out: DatasetOutput): Promise<DatasetStats> {
  let included = 0;
  for await (const { buffers, bounds, count } of rows(options.format === "parquet" ? "parquet" : "line")) {
    for (let r = 0; r < count; r++) {
      const wrote = out.add(buffers[r]!, bounds[2 * r]!, bounds[2 * r + 1]!);
      if (wrote) await wrote;
    }
    included += count;
  }
  return { included };
}

/**
 * Each sample of the selection, in order, through the options: `validate` leaves out what the
 * format refuses, `dedupe` the repeats of a conversation already kept (the oldest stays),
 * `maxTokens` what is longer (with `tokenizer`, what the model's chat template refuses is left out
 * too); what remains goes to its split's file. A sample is counted once, under the first of these
 * that leaves it out.
 */
export async function packageRows(
  job: Pick<DatasetJob, "options" | "tokenizerModel" | "size">,
  rows: Rows,
  outputs: Map<SplitName | null, DatasetOutput>,
  signal: AbortSignal,
): Promise<DatasetStats> {
  const o = job.options;
  // Counting tokens (from the tokenizer's loading on), or parsing large samples, leaves much
  // garbage: the heap is then held tight.
  let releaseHeap = o.tokenizer ? holdTightHeap() : undefined;
  try {
    const counter = o.tokenizer ? await tokenCounter(o.tokenizer, job.tokenizerModel!, signal) : undefined;
    const invalid: Partial<Record<InvalidReason, number>> = {};
    const seen = o.dedupe ? new SeenConversations(job.size) : undefined;
    const tally = counter ? new TokenTally() : undefined;
    const splits = { train: 0, validation: 0 };
    let duplicate = 0;
    let tooLong = 0;
    let template = 0;
    let included = 0;
    // validate and dedupe read a plain conversation off its bytes, and parse only the others; token
    // counting needs every conversation parsed.
    const plain = (o.validate || seen) && !counter ? new PlainConversation() : undefined;
    const fields = o.split ? 2 : 1;
    for await (const { buffers, bounds } of rows(o.format === "parquet" ? "parquet" : "line")) {
      signal.throwIfAborted();
      for (let r = 0; r < buffers.length; r++) {
        // The line (JSONL's, or the Parquet record's: both have the messages), then with a split
        // the side Postgres computed, a 4-byte integer (splitSideSql: 1 validation).
        const data = buffers[r]!;
        const b = r * fields * 2;
        const start = bounds[b]!;
        const end = bounds[b + 1]!;
        const read = plain?.read(data, start, end) ?? false;
        const parse = !read && (o.validate || seen || counter);
        if (parse && !releaseHeap && end - start >= LARGE_PARSED_SAMPLE_BYTES) releaseHeap = holdTightHeap();
        const parsed: { messages: Message[]; tools?: unknown[]; f?: unknown[] } | undefined = parse
          ? JSON.parse(data.toString("utf8", start, end))
          : undefined;
        const messages = parsed?.messages;
        if (o.validate) {
          const reason = read ? plain!.refusal : openAiChatRefusal(messages!);
          if (reason) {
            invalid[reason] = (invalid[reason] ?? 0) + 1;
            continue;
          }
        }
        if (seen && !(read ? seen.addKey(plain!.key, plain!.keyLength) : seen.add(messages!))) {
          duplicate++;
          continue;
        }
        let tokens: number | undefined;
        try {
          // A JSONL line carries its tools; a Parquet record, in `f` (their JSON text).
          const tools = parsed?.tools ?? toolsOfRecord(parsed);
          tokens = counter?.(messages!, tools);
        } catch (e) {
          if (!(e instanceof TemplateRefusal)) throw e;
          template++;
          continue;
        }
        if (tokens !== undefined && o.maxTokens !== undefined && tokens > o.maxTokens) {
          tooLong++;
          continue;
        }
        if (tokens !== undefined) tally!.add(tokens);
        const side: SplitName | null = o.split ? (data[bounds[b + 3]! - 1] === 1 ? "validation" : "train") : null;
        if (side) splits[side]++;
        included++;
        const wrote = outputs.get(side)!.add(data, start, end);
        if (wrote) {
          await wrote;
          signal.throwIfAborted();
        }
      }
    }
    const skipped = {
      ...(o.validate ? { invalid } : {}),
      ...(o.dedupe ? { duplicate } : {}),
      ...(o.maxTokens !== undefined ? { tooLong } : {}),
      ...(template > 0 ? { template } : {}),
    };
    return {
      included,
      ...(Object.keys(skipped).length > 0 ? { skipped } : {}),
      ...(o.split ? { splits } : {}),
      ...(tally ? { tokens: tally.stats() } : {}),
    };
  } finally {
    releaseHeap?.();
  }
}

async function tokenCounter(deployment: string, model: string, signal: AbortSignal): Promise<TokenCounter> {
  try {
    return await loadTokenCounter(model, signal);
  } catch (err) {
    if (signal.aborted) throw signal.reason; // deleted, lease lost, worker stopping: not a failure
    if (err instanceof TemplateRefusal)
      throw new PackagingError(
        `The chat template of deployment '${deployment}' (${model}) cannot render a plain conversation ` +
          `(${err.message.slice(0, 200)}): every sample would be left out.`,
        { cause: err },
      );
    throw new PackagingError(`Could not load the tokenizer of deployment '${deployment}' (${model}).`, { cause: err });
  }
}

/** The tools of a Parquet record line (`f[4]`, their JSON text, or null). */
function toolsOfRecord(record: { f?: unknown[] } | undefined): unknown[] | undefined {
  const text = record?.f?.[4];
  return typeof text === "string" ? (JSON.parse(text) as unknown[]) : undefined;
}
