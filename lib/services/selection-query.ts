import { sql, type SQL } from "drizzle-orm";
import type { GenerationFilter, MetadataCondition, Selection } from "../contracts/pipelines";
import type { DbOrTx } from "../db/client";
import { sampleSearchText } from "../db/schema/pipelines";

/**
 * A selection as SQL: where its rows come from, their conditions, and the two columns of the
 * selection order (created_at, sample id). Consumers add the order, keyset and limit.
 */
export type Source = { from: SQL; where: SQL[]; ts: SQL; id: SQL };

type Label = [key: string, condition: MetadataCondition];

/**
 * How a positive label condition (one that only samples carrying the key can meet) reads its
 * labels, best driver first: one value is one ordered range of the primary key; `$in` is a few
 * such ranges; a prefix is one range of values; `$exists` is every value (see driverLabels).
 */
const DRIVER_RANK = { eq: 0, in: 1, prefix: 2, exists: 3 } as const;

function positiveKind(c: MetadataCondition): keyof typeof DRIVER_RANK | undefined {
  if (typeof c === "string") return "eq";
  if ("$in" in c) return "in";
  if ("$prefix" in c) return "prefix";
  if ("$exists" in c && c.$exists) return "exists";
  return undefined; // $ne and $exists: false also match samples without the key
}

/** The smallest string above every string that starts with `prefix`, in code-point order. */
export function prefixUpperBound(prefix: string): string | undefined {
  const points = [...prefix];
  while (points.length > 0) {
    const last = points.pop()!.codePointAt(0)!;
    // Skip the surrogate range: it holds no character (and cannot be stored).
    const next = last === 0xd7ff ? 0xe000 : last + 1;
    if (next <= 0x10ffff) return points.join("") + String.fromCodePoint(next);
  }
  return undefined; // the prefix was all U+10FFFF: no upper bound
}

/** The condition on one label row `l` (its key already matched). */
function valueCondition(l: SQL, c: MetadataCondition): SQL | undefined {
  if (typeof c === "string") return sql`${l}.value = ${c}`;
  if ("$in" in c) return sql`${l}.value = any(${textArray(c.$in)})`;
  if ("$ne" in c) return sql`${l}.value = ${c.$ne}`; // the label that a sample must NOT have
  if ("$prefix" in c) {
    const upper = prefixUpperBound(c.$prefix);
    const range = upper === undefined ? sql`` : sql` and ${l}.value < ${upper}`;
    return sql`${l}.value >= ${c.$prefix}${range} and starts_with(${l}.value, ${c.$prefix})`;
  }
  return undefined; // $exists: the key alone
}

/** A text[] literal element: quoted, with `"` and `\` escaped. */
const arrayElement = (v: string) => `"${v.replace(/[\\"]/g, (ch) => `\\${ch}`)}"`;

/** Strings as one text[] parameter (drizzle would spread a JS array into a list of parameters). */
export const textArray = (values: readonly string[]): SQL => sql`${`{${values.map(arrayElement).join(",")}}`}::text[]`;

/** `%`, `_` and `\` taken literally in a LIKE pattern (backslash is LIKE's escape character). */
const likeLiteral = (s: string) => s.replace(/[\\%_]/g, (ch) => `\\${ch}`);

/**
 * `search`: the trigram index finds candidates in the contents as one JSON array (where the term
 * is written JSON-escaped), and each candidate is then checked message by message, so escapes
 * (`\n` holds an `n`) and matches across two messages never count.
 */
function searchConditions(s: SQL, term: string): SQL[] {
  const escaped = JSON.stringify(term).slice(1, -1);
  return [
    sql`${sampleSearchText(sql`${s}.messages`)} ilike ${`%${likeLiteral(escaped)}%`}`,
    sql`exists (select 1 from jsonb_array_elements(${s}.messages) m where m->>'content' ilike ${`%${likeLiteral(term)}%`})`,
  ];
}

/**
 * The generation filter on a samples row: conditions on its generation facts (jsonb, null for a
 * sample added rather than captured), checked on each candidate row the other conditions drive.
 */
export function generationConditions(s: SQL, g: GenerationFilter): SQL[] {
  const out: SQL[] = [];
  if (g.captured === true) out.push(sql`${s}.generation is not null`);
  if (g.captured === false) out.push(sql`${s}.generation is null`);
  if (g.finishReason !== undefined) out.push(sql`${s}.generation ->> 'finishReason' = ${g.finishReason}`);
  if (g.keyId !== undefined) out.push(sql`${s}.generation ->> 'keyId' = ${g.keyId}`);
  if (g.deployment !== undefined) out.push(sql`${s}.generation ->> 'deployment' = ${g.deployment}`);
  return out;
}

/**
 * Where a selection's rows come from. With no positive metadata condition: samples, through the
 * order index, the user/group indexes or the search index (the planner picks). With one: the
 * labels of the best driver (see DRIVER_RANK), in selection order; every other label condition
 * is a probe by (key, created_at, sample_id): `exists` for positive ones, `not exists` for
 * `$ne` and `$exists: false`. `withSamples` joins the samples (listing, or to filter them).
 */
export function selectionSource(pipelineId: string, s: Selection, withSamples: boolean): Source {
  const labels: Label[] = Object.entries(s.metadata ?? {});
  const driverIndex = labels.reduce<number>((best, [, c], i) => {
    const kind = positiveKind(c);
    if (kind === undefined) return best;
    if (best < 0) return i;
    return DRIVER_RANK[kind] < DRIVER_RANK[positiveKind(labels[best]![1])!] ? i : best;
  }, -1);
  const sampleFilters: SQL[] = [];
  if (s.userId !== undefined) sampleFilters.push(sql`s.user_id = ${s.userId}`);
  if (s.groupId !== undefined) sampleFilters.push(sql`s.group_id = ${s.groupId}`);
  if (s.search !== undefined) sampleFilters.push(...searchConditions(sql`s`, s.search));
  if (s.generation !== undefined) sampleFilters.push(...generationConditions(sql`s`, s.generation));
  if (s.importId !== undefined) sampleFilters.push(sql`s.import_id = ${s.importId}`);

  let src: Source;
  if (driverIndex < 0) {
    src = {
      from: sql`samples s`,
      where: [sql`s.pipeline_id = ${pipelineId}`, ...sampleFilters],
      ts: sql`s.created_at`,
      id: sql`s.id`,
    };
  } else {
    const [key, condition] = labels[driverIndex]!;
    src = { from: driverLabels(pipelineId, key, condition), where: [], ts: sql`l0.created_at`, id: sql`l0.sample_id` };
    if (sampleFilters.length > 0) {
      // Joined on the whole order key: the samples side can then come from the
      // (pipeline, user|group, created_at, id) index in selection order and merge with the labels
      // (1M samples, metadata + userId: count 103 -> 6 ms, page 92 -> 0.7 ms). Without it the
      // planner misjudges these correlated conditions (it expects one row) and scans all samples.
      src.from = sql`${src.from} join samples s on s.pipeline_id = ${pipelineId} and s.created_at = l0.created_at
        and s.id = l0.sample_id`;
      src.where.push(...sampleFilters);
    } else if (withSamples) {
      src.from = sql`${src.from} join samples s on s.id = l0.sample_id`;
    }
  }
  labels.forEach(([key, condition], i) => {
    if (i !== driverIndex) src.where.push(labelProbe(pipelineId, key, condition, src));
  });
  if (s.createdAfter !== undefined) src.where.push(sql`${src.ts} > ${s.createdAfter}::timestamptz`);
  if (s.createdBefore !== undefined) src.where.push(sql`${src.ts} < ${s.createdBefore}::timestamptz`);
  return src;
}

/**
 * The driver's labels as `l0 (created_at, sample_id)`. A value, or a prefix or `$in` whose rows
 * are few, is read from the primary key (and sorted); a common prefix, `$in` or `$exists` is read
 * in selection order from sample_labels_key_order_idx, filtered on the value: the planner
 * weighs the two with the value's statistics.
 */
function driverLabels(pipelineId: string, key: string, c: MetadataCondition): SQL {
  const value = valueCondition(sql`l`, c);
  return sql`(select created_at, sample_id from sample_labels l where l.pipeline_id = ${pipelineId} and l.key = ${key}${
    value ? sql` and ${value}` : sql``
  }) l0`;
}

/** `[not] exists` one label row of the sample at (ts, id): a probe of an index, per candidate. */
function labelProbe(pipelineId: string, key: string, c: MetadataCondition, src: Source): SQL {
  const negative = positiveKind(c) === undefined;
  const value = valueCondition(sql`x`, c);
  return sql`${negative ? sql`not exists` : sql`exists`} (select 1 from sample_labels x
    where x.pipeline_id = ${pipelineId} and x.key = ${key} and x.created_at = ${src.ts} and x.sample_id = ${src.id}${
      value ? sql` and ${value}` : sql``
    })`;
}

/** The frozen selection's upper bound in selection order; null when the pipeline was empty. */
export type SelectionBound = { createdAt: string; sampleId: string } | null;

/** The SQL condition "at or before the bound" on a source's order columns. */
export function withinBound(src: Pick<Source, "ts" | "id">, bound: NonNullable<SelectionBound>): SQL {
  return sql`(${src.ts}, ${src.id}) <= (${bound.createdAt}::timestamptz, ${bound.sampleId})`;
}

/** The SQL condition "after the sample at `at`" in selection order: a cursor, a keyset page, past a bound. */
export function afterSample(src: Pick<Source, "ts" | "id">, at: { createdAt: string; id: string }): SQL {
  return sql`(${src.ts}, ${src.id}) > (${at.createdAt}::timestamptz, ${at.id})`;
}

/**
 * The selection's rows, `sample` applied: a uniform random subset of `size` rows of the filtered
 * selection (frozen at `bound` when given), the rows whose ids come first in the order of
 * hashtextextended(id, seed). The same seed on the same data picks the same rows; a sample
 * added later joins the pick only by displacing the row it hashes below. The consumers order
 * the result by (ts, id) and apply limit and offset after.
 */
export function selectionRows(
  pipelineId: string,
  s: Selection,
  options: { withSamples: boolean; bound?: NonNullable<SelectionBound> },
): Source {
  const src = selectionSource(pipelineId, s, options.withSamples && !s.sample);
  if (options.bound) src.where.push(withinBound(src, options.bound));
  if (!s.sample) return src;
  // No condition at all (one positive metadata condition drives the scan from its labels, and
  // no bound): no `where`, which would be a syntax error empty.
  const picked = sql`(select ${src.ts} as ts, ${src.id} as id from ${src.from}
    ${whereOf(src)}
    order by hashtextextended(${src.id}, ${s.sample.seed}), ${src.id} limit ${s.sample.size}) picked`;
  return {
    from: options.withSamples ? sql`${picked} join samples s on s.id = picked.id` : picked,
    where: [],
    ts: sql`picked.ts`,
    id: sql`picked.id`,
  };
}

/** `where …` of a source, or nothing when it has no condition. */
export const whereOf = (src: Source): SQL =>
  src.where.length > 0 ? sql`where ${sql.join(src.where, sql` and `)}` : sql``;

/** The number of rows a selection lists, given the size of its filtered set: sample, offset, limit. */
export function listedCount(s: Partial<Pick<Selection, "sample" | "limit" | "offset">>, filtered: number): number {
  const sampled = s.sample ? Math.min(s.sample.size, filtered) : filtered;
  const total = Math.max(0, sampled - (s.offset ?? 0));
  return s.limit === undefined ? total : Math.min(total, s.limit);
}

/**
 * The size of a selection's filtered set (before sample, offset and limit), as a sum of counts
 * (countTerms) run side by side. A count that filters nothing is the pipeline's own, which
 * Postgres keeps (pipelineCount). With no positive label condition, `$ne` and `$exists: false`
 * are counted as differences from it: count(P and not A) = count(P) - count(P and A), the second
 * an index range (with two of them, inclusion-exclusion: four counts). An anti-join would instead
 * probe for every sample of the pipeline (1M samples: ~400 ms, against ~30 ms).
 */
export async function filteredCount(
  db: DbOrTx,
  pipelineId: string,
  s: Selection,
  bound?: NonNullable<SelectionBound>,
  after?: { createdAt: string; id: string },
): Promise<number> {
  const terms = countTerms(s);
  const counts = await Promise.all(
    terms.map(async ({ selection }) => {
      if (!after && filtersNothing(selection)) return pipelineCount(db, pipelineId, bound);
      const src = selectionSource(pipelineId, selection, false);
      if (bound) src.where.push(withinBound(src, bound));
      if (after) src.where.push(afterSample(src, after));
      const [row] = await db.execute<{ count: number }>(
        sql`select count(*)::int as count from ${src.from} ${whereOf(src)}`,
      );
      return row?.count ?? 0;
    }),
  );
  return terms.reduce((total, { sign }, i) => total + sign * counts[i]!, 0);
}

const filtersNothing = (s: Selection) =>
  s.userId === undefined &&
  s.groupId === undefined &&
  s.search === undefined &&
  s.createdAfter === undefined &&
  s.createdBefore === undefined &&
  (s.generation === undefined || generationConditions(sql`s`, s.generation).length === 0) &&
  s.importId === undefined &&
  Object.keys(s.metadata ?? {}).length === 0;

/**
 * The pipeline's number of samples (up to `bound`) from the counts Postgres keeps
 * (pipeline_sample_counts, a few rows), less those added after the bound: an ordered range of
 * the pipeline's order index, usually empty or short. One statement, so one snapshot.
 */
async function pipelineCount(db: DbOrTx, pipelineId: string, bound?: NonNullable<SelectionBound>): Promise<number> {
  const later = bound
    ? sql` - (select count(*) from samples s where s.pipeline_id = ${pipelineId}
        and ${afterSample({ ts: sql`s.created_at`, id: sql`s.id` }, { createdAt: bound.createdAt, id: bound.sampleId })})`
    : sql``;
  const [row] = await db.execute<{ count: number }>(
    sql`select ((select coalesce(sum(n), 0) from pipeline_sample_counts where pipeline_id = ${pipelineId})${later})::int as count`,
  );
  return row?.count ?? 0;
}

type CountTerm = { sign: 1 | -1; selection: Selection };

/**
 * A `$in` of at most this many values that drives a count is counted value by value: each is
 * one range of the labels' primary key, and a sample has one value per key, so they add up. As
 * one query, two common values (1M samples, 10% each) made the planner scan every label of the
 * pipeline: 116 ms, against 2 × 27 ms side by side.
 */
const IN_COUNTED_APART = 4;

function countTerms(s: Selection): CountTerm[] {
  const labels = Object.entries(s.metadata ?? {});
  const valueDriven = labels.some(([, c]) => typeof c === "string"); // a plain value drives instead
  const split = valueDriven
    ? undefined
    : labels.find(([, c]) => typeof c !== "string" && "$in" in c && c.$in.length <= IN_COUNTED_APART);
  if (split) {
    const [key, c] = split as [string, { $in: string[] }];
    return [...new Set(c.$in)].flatMap((value) => countTerms({ ...s, metadata: { ...s.metadata, [key]: value } }));
  }
  const negatives = labels.filter(([, c]) => positiveKind(c) === undefined);
  if (negatives.length === 0 || negatives.length > 2 || negatives.length < labels.length)
    return [{ sign: 1, selection: s }];
  // Each subset of the negated conditions, asserted positively; the sign alternates with its size.
  return [[], ...negatives.map((n) => [n]), ...(negatives.length === 2 ? [negatives] : [])].map((subset) => ({
    sign: subset.length % 2 === 0 ? 1 : -1,
    selection: {
      ...s,
      metadata: Object.fromEntries(
        subset.map(([key, c]) => [key, typeof c !== "string" && "$ne" in c ? c.$ne : { $exists: true }]),
      ),
    },
  }));
}
