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
