import { z } from "zod";
import {
  SelectionBody,
  SelectionFilterShape,
  GenerationFilter,
  type MetadataCondition,
  type MetadataFilter,
  type Selection,
} from "../contracts/pipelines";

/**
 * The dashboard's selection lives in the URL so it can be shared and reloaded:
 * `?userId=u1&groupId=g1&meta.lang=en&ne.tier=pro&in.src=a&in.src=b&exists.x=false&prefix.c=ab
 *  &createdAfter=…&createdBefore=…&search=refund&gen.captured=true&gen.finishReason=stop&gen.keyId=key_…
 *  &gen.deployment=team/name&importId=imp_…&sampleSize=100&sampleSeed=7&limit=50&offset=100&sample=smp_…`.
 * Metadata keys travel in the parameter name (`<op>.<key>`), so a key may hold any character.
 * Values the API would reject are dropped rather than failing the page.
 */
export const PAGE_SIZES = [25, 50, 100, 200] as const;
export const DEFAULT_PAGE_SIZE = 50;
const META = "meta.";
const GEN = "gen.";
const GENERATION_FIELDS = ["captured", "finishReason", "keyId", "deployment"] as const;
/** The URL prefix of each metadata operator (`meta.` is equality). */
const OPERATOR_PREFIXES = { "ne.": "$ne", "in.": "$in", "exists.": "$exists", "prefix.": "$prefix" } as const;

/** A page of the selection table: the API's filters, with a page size the UI bounds. */
export const UiSamplesPageBody = z.strictObject({
  ...SelectionFilterShape,
  limit: z.number().int().min(1).max(500),
  offset: z.number().int().min(0).max(100_000_000).default(0),
});

export type SelectionState = {
  userId?: string;
  groupId?: string;
  metadata: MetadataFilter;
  createdAfter?: string;
  createdBefore?: string;
  search?: string;
  /** Conditions on captured samples' generation facts (`gen.<field>` in the URL). */
  generation?: GenerationFilter;
  /** The samples one import stored. */
  importId?: string;
  /** `sample: {size, seed}` of the API (`sample` here is the open sample). */
  sampleSize?: number;
  sampleSeed?: number;
  limit: number;
  offset: number;
  /** The sample open in the side panel. */
  sample?: string;
};

type ParamsLike = URLSearchParams | Record<string, string | string[] | undefined>;

function entries(params: ParamsLike): [string, string][] {
  if (params instanceof URLSearchParams) return [...params.entries()];
  return Object.entries(params).flatMap(([k, v]) =>
    v === undefined ? [] : Array.isArray(v) ? v.map((x): [string, string] => [k, x]) : [[k, v]],
  );
}

const label = SelectionFilterShape.userId;

export function parseSelectionParams(params: ParamsLike): SelectionState {
  const state: SelectionState = { metadata: {}, limit: DEFAULT_PAGE_SIZE, offset: 0 };
  const setCondition = (key: string, condition: MetadataCondition) => {
    const candidate = { ...state.metadata, [key]: condition };
    if (SelectionBody.safeParse({ metadata: candidate }).success) state.metadata = candidate;
  };
  const accept = <K extends "createdAfter" | "createdBefore" | "search">(key: K, value: string) => {
    const v = SelectionFilterShape[key].safeParse(value);
    if (v.success && v.data !== undefined) state[key] = v.data;
  };
  for (const [key, value] of entries(params)) {
    const operator = Object.entries(OPERATOR_PREFIXES).find(
      ([prefix]) => key.startsWith(prefix) && key.length > prefix.length,
    );
    if (key === "userId" || key === "groupId" || key === "importId") {
      const v = label.safeParse(value);
      if (v.success && v.data !== undefined) state[key] = v.data;
    } else if (key.startsWith(META) && key.length > META.length) {
      setCondition(key.slice(META.length), value);
    } else if (operator) {
      const [prefix, op] = operator;
      const k = key.slice(prefix.length);
      const current = state.metadata[k];
      if (op === "$in") {
        const values = typeof current === "object" && "$in" in current ? [...current.$in, value] : [value];
        setCondition(k, { $in: values });
      } else if (op === "$exists") {
        if (value === "true" || value === "false") setCondition(k, { $exists: value === "true" });
      } else setCondition(k, { [op]: value } as MetadataCondition);
    } else if (key === "createdAfter" || key === "createdBefore" || key === "search") {
      accept(key, value);
    } else if (key.startsWith(GEN) && GENERATION_FIELDS.includes(key.slice(GEN.length) as never)) {
      const field = key.slice(GEN.length) as keyof GenerationFilter;
      const raw = field === "captured" ? (value === "true" ? true : value === "false" ? false : value) : value;
      const candidate = { ...state.generation, [field]: raw };
      if (GenerationFilter.safeParse(candidate).success) state.generation = candidate as GenerationFilter;
    } else if (key === "sampleSize" || key === "sampleSeed") {
      const n = Number(value);
      if (Number.isSafeInteger(n) && n >= (key === "sampleSize" ? 1 : 0)) state[key] = n;
    } else if (key === "limit") {
      const n = Number(value);
      if ((PAGE_SIZES as readonly number[]).includes(n)) state.limit = n;
    } else if (key === "offset") {
      const n = Number(value);
      if (Number.isInteger(n) && n >= 0 && n <= 100_000_000) state.offset = n;
    } else if (key === "sample" && /^smp_[a-z0-9]{1,40}$/.test(value)) {
      state.sample = value;
    }
  }
  return state;
}

/** The canonical query string of a state (defaults left out), without the leading `?`. */
export function selectionToSearch(state: SelectionState): string {
  const p = new URLSearchParams();
  if (state.userId) p.set("userId", state.userId);
  if (state.groupId) p.set("groupId", state.groupId);
  for (const [k, c] of Object.entries(state.metadata)) {
    if (typeof c === "string") p.append(META + k, c);
    else if ("$ne" in c) p.append(`ne.${k}`, c.$ne);
    else if ("$in" in c) for (const v of c.$in) p.append(`in.${k}`, v);
    else if ("$exists" in c) p.append(`exists.${k}`, String(c.$exists));
    else p.append(`prefix.${k}`, c.$prefix);
  }
  if (state.createdAfter) p.set("createdAfter", state.createdAfter);
  if (state.createdBefore) p.set("createdBefore", state.createdBefore);
  if (state.search) p.set("search", state.search);
  for (const field of GENERATION_FIELDS) {
    const v = state.generation?.[field];
    if (v !== undefined) p.set(GEN + field, String(v));
  }
  if (state.importId) p.set("importId", state.importId);
  if (state.sampleSize !== undefined) p.set("sampleSize", String(state.sampleSize));
  if (state.sampleSeed !== undefined) p.set("sampleSeed", String(state.sampleSeed));
  if (state.limit !== DEFAULT_PAGE_SIZE) p.set("limit", String(state.limit));
  if (state.offset > 0) p.set("offset", String(state.offset));
  if (state.sample) p.set("sample", state.sample);
  return p.toString();
}

/** How a metadata condition reads on a chip: `lang = en`, `lang ≠ en`, `lang in en, fr`, … */
export function describeCondition(key: string, c: MetadataCondition): string {
  if (typeof c === "string") return `${key} = ${c}`;
  if ("$ne" in c) return `${key} ≠ ${c.$ne}`;
  if ("$in" in c) return `${key} in ${c.$in.join(", ")}`;
  if ("$exists" in c) return c.$exists ? `${key} exists` : `no ${key}`;
  return `${key} starts with ${c.$prefix}`;
}

/** A selection body as a client writes it (absent fields left out). */
export type SelectionFilter = Partial<Omit<Selection, "generation">> & { generation?: GenerationFilter };

/** The filter part, as the hosted API's selection body (for count and create-dataset). */
export function filterOf(state: SelectionState): SelectionFilter {
  return {
    ...(state.userId ? { userId: state.userId } : {}),
    ...(state.groupId ? { groupId: state.groupId } : {}),
    ...(Object.keys(state.metadata).length > 0 ? { metadata: state.metadata } : {}),
    ...(state.createdAfter ? { createdAfter: state.createdAfter } : {}),
    ...(state.createdBefore ? { createdBefore: state.createdBefore } : {}),
    ...(state.search ? { search: state.search } : {}),
    ...(state.generation && Object.keys(state.generation).length > 0 ? { generation: state.generation } : {}),
    ...(state.importId ? { importId: state.importId } : {}),
    ...(state.sampleSize !== undefined ? { sample: { size: state.sampleSize, seed: state.sampleSeed ?? 0 } } : {}),
  };
}

export function hasFilter(state: SelectionState): boolean {
  return Object.keys(filterOf(state)).length > 0;
}

/** The react-query key of a page of the table (the server renders the first one under it). */
export function pageKey(pipelineId: string, s: SelectionState) {
  return ["samples", pipelineId, filterOf(s), s.limit, s.offset] as const;
}
