import { z } from "zod";
import { SelectionBody, SelectionFilterShape, type Selection } from "../contracts/pipelines";

/**
 * The dashboard's selection lives in the URL so it can be shared and reloaded:
 * `?userId=u1&groupId=g1&meta.lang=en&meta.tier=pro&limit=50&offset=100&sample=smp_…`.
 * Metadata keys travel in the parameter name (`meta.<key>`), so a key may hold any character.
 * Values the API would reject are dropped rather than failing the page.
 */
export const PAGE_SIZES = [25, 50, 100, 200] as const;
export const DEFAULT_PAGE_SIZE = 50;
const META = "meta.";

/** A page of the selection table: the API's filters, with a page size the UI bounds. */
export const UiSamplesPageBody = z.strictObject({
  ...SelectionFilterShape,
  limit: z.number().int().min(1).max(500),
  offset: z.number().int().min(0).max(100_000_000).default(0),
});

export type SelectionState = {
  userId?: string;
  groupId?: string;
  metadata: Record<string, string>;
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
  for (const [key, value] of entries(params)) {
    if (key === "userId" || key === "groupId") {
      const v = label.safeParse(value);
      if (v.success && v.data !== undefined) state[key] = v.data;
    } else if (key.startsWith(META) && key.length > META.length) {
      const candidate = { ...state.metadata, [key.slice(META.length)]: value };
      if (SelectionBody.safeParse({ metadata: candidate }).success) state.metadata = candidate;
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
  for (const [k, v] of Object.entries(state.metadata)) p.append(META + k, v);
  if (state.limit !== DEFAULT_PAGE_SIZE) p.set("limit", String(state.limit));
  if (state.offset > 0) p.set("offset", String(state.offset));
  if (state.sample) p.set("sample", state.sample);
  return p.toString();
}

/** A selection body as a client writes it (absent fields left out). */
export type SelectionFilter = Partial<Selection>;

/** The filter part, as the hosted API's selection body (for count and create-dataset). */
export function filterOf(state: SelectionState): SelectionFilter {
  return {
    ...(state.userId ? { userId: state.userId } : {}),
    ...(state.groupId ? { groupId: state.groupId } : {}),
    ...(Object.keys(state.metadata).length > 0 ? { metadata: state.metadata } : {}),
  };
}

export function hasFilter(state: SelectionState): boolean {
  return Object.keys(filterOf(state)).length > 0;
}

/** The react-query key of a page of the table (the server renders the first one under it). */
export function pageKey(pipelineId: string, s: SelectionState) {
  return ["samples", pipelineId, filterOf(s), s.limit, s.offset] as const;
}
