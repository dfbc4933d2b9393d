"use client";

import { SelectionBody } from "@/lib/contracts/pipelines";
import type { SelectionState } from "@/lib/ui/selection-params";
import { fieldErrors } from "../ui/form-errors";
import { TextFilter } from "./text-filter";

type Props = {
  state: SelectionState;
  onChange: (patch: Partial<SelectionState>) => void;
  onError: (message: string | undefined) => void;
};

/** An ISO timestamp as the value of a datetime-local input (the browser's time zone), and back. */
const toLocalInput = (iso: string | undefined) => {
  if (!iso) return "";
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};
const fromLocalInput = (value: string) => (value ? new Date(value).toISOString() : undefined);

/**
 * The "Origin" choices: how a sample came to be (added, or captured from a completion) and, when
 * captured, how its completion finished. `keyId` and `deployment` (from a shared link, or the
 * sample panel) are kept whatever is chosen here.
 */
const ORIGINS = [
  ["", "Any", {}],
  ["captured", "Captured completions", { captured: true }],
  ["finished", "Captured, finished", { finishReason: "stop" }],
  ["cut", "Captured, cut at max tokens", { finishReason: "length" }],
  ["added", "Added (not captured)", { captured: false }],
] as const;

const originOf = (g: SelectionState["generation"]) =>
  g?.finishReason === "stop"
    ? "finished"
    : g?.finishReason === "length"
      ? "cut"
      : g?.captured === true
        ? "captured"
        : g?.captured === false
          ? "added"
          : "";

/** Date bounds, message search and a seeded random sample: each applied on Enter or on leaving it. */
export function FilterExtras({ state, onChange, onError }: Props) {
  const apply = (patch: Partial<SelectionState>) => {
    const next = { ...state, ...patch };
    const body = {
      createdAfter: next.createdAfter,
      createdBefore: next.createdBefore,
      search: next.search,
      ...(next.sampleSize !== undefined ? { sample: { size: next.sampleSize, seed: next.sampleSeed ?? 0 } } : {}),
    };
    const parsed = SelectionBody.safeParse(body);
    if (!parsed.success) {
      const [field, message] = Object.entries(fieldErrors(parsed.error))[0] ?? ["filter", "invalid"];
      return onError(`${field}: ${message}`);
    }
    onError(undefined);
    onChange({ ...patch, offset: 0, sample: undefined });
  };
  return (
    <div className="flex flex-wrap items-end gap-3">
      <TextFilter
        id="filter-search"
        label="Search messages"
        className="w-56"
        value={state.search ?? ""}
        placeholder="any text"
        onApply={(v) => v !== (state.search ?? "") && apply({ search: v || undefined })}
      />
      <TextFilter
        id="filter-created-after"
        label="Created after"
        type="datetime-local"
        className="w-52"
        value={toLocalInput(state.createdAfter)}
        onApply={(v) => v !== toLocalInput(state.createdAfter) && apply({ createdAfter: fromLocalInput(v) })}
      />
      <TextFilter
        id="filter-created-before"
        label="Created before"
        type="datetime-local"
        className="w-52"
        value={toLocalInput(state.createdBefore)}
        onApply={(v) => v !== toLocalInput(state.createdBefore) && apply({ createdBefore: fromLocalInput(v) })}
      />
      <div className="space-y-1">
        <label htmlFor="filter-origin" className="block text-xs font-medium text-zinc-600 dark:text-zinc-400">
          Origin
        </label>
        <select
          id="filter-origin"
          value={originOf(state.generation)}
          onChange={(e) => {
            const origin = ORIGINS.find(([value]) => value === e.target.value)![2];
            const { keyId, deployment } = state.generation ?? {};
            const generation = {
              ...origin,
              ...(keyId ? { keyId } : {}),
              ...(deployment ? { deployment } : {}),
            };
            onError(undefined);
            onChange({
              generation: Object.keys(generation).length > 0 ? generation : undefined,
              offset: 0,
              sample: undefined,
            });
          }}
          className="block h-9 rounded-md border border-zinc-300 bg-white px-2 text-sm dark:border-zinc-700 dark:bg-zinc-900"
        >
          {ORIGINS.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
      </div>
      <TextFilter
        id="filter-sample-size"
        label="Random sample of"
        type="number"
        className="w-32"
        value={state.sampleSize === undefined ? "" : String(state.sampleSize)}
        placeholder="all"
        onApply={(v) =>
          v !== String(state.sampleSize ?? "") &&
          apply({ sampleSize: v ? Number(v) : undefined, sampleSeed: v ? (state.sampleSeed ?? 0) : undefined })
        }
      />
      <TextFilter
        id="filter-sample-seed"
        label="Seed"
        type="number"
        className="w-24"
        value={state.sampleSeed === undefined ? "" : String(state.sampleSeed)}
        placeholder="0"
        disabled={state.sampleSize === undefined}
        onApply={(v) => v !== String(state.sampleSeed ?? "") && apply({ sampleSeed: v ? Number(v) : 0 })}
      />
    </div>
  );
}
