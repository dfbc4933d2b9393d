"use client";

import { useState } from "react";
import { SelectionBody } from "@/lib/contracts/pipelines";
import { describeCondition, type SelectionState } from "@/lib/ui/selection-params";
import { fieldErrors } from "../ui/form-errors";
import { FilterExtras } from "./filter-extras";
import { MetadataForm } from "./metadata-form";
import { TextFilter } from "./text-filter";

type Props = {
  state: SelectionState;
  onChange: (patch: Partial<SelectionState>) => void;
};

/**
 * userId / groupId inputs (applied on Enter or when leaving the field), metadata conditions as
 * chips, and the dates, search and random sample (filter-extras).
 */
export function FilterBar({ state, onChange }: Props) {
  const [error, setError] = useState<string | undefined>();
  const applyLabel = (field: "userId" | "groupId", raw: string) => {
    const value = raw.trim() || undefined;
    if (value === state[field]) return;
    const parsed = SelectionBody.safeParse({ [field]: value });
    if (!parsed.success) return setError(`${field}: ${fieldErrors(parsed.error)[field]}`);
    setError(undefined);
    onChange({ [field]: value, offset: 0, sample: undefined });
  };
  // Where samples came from, set by links (a key's or a deployment's captures, an import's lines):
  // shown as chips that remove themselves.
  const originChips: { id: string; text: string; remove: Partial<SelectionState> }[] = [];
  for (const field of ["keyId", "deployment"] as const) {
    const value = state.generation?.[field];
    if (!value) continue;
    const generation = { ...state.generation };
    delete generation[field];
    originChips.push({
      id: field,
      text: `${field === "keyId" ? "key" : "deployment"} = ${value}`,
      remove: { generation: Object.keys(generation).length > 0 ? generation : undefined },
    });
  }
  if (state.importId)
    originChips.push({ id: "import", text: `import = ${state.importId}`, remove: { importId: undefined } });
  return (
    <div className="space-y-3" data-testid="filter-bar">
      <div className="flex flex-wrap items-end gap-3">
        {(["userId", "groupId"] as const).map((field) => (
          <TextFilter
            key={field}
            id={`filter-${field}`}
            label={field}
            className="w-48"
            placeholder="any"
            value={state[field] ?? ""}
            onApply={(v) => applyLabel(field, v)}
          />
        ))}
        <MetadataForm
          onAdd={(key, condition) => {
            const metadata = { ...state.metadata, [key]: condition };
            const parsed = SelectionBody.safeParse({ metadata });
            if (!parsed.success) return parsed.error.issues[0]?.message ?? "invalid filter";
            setError(undefined);
            onChange({ metadata, offset: 0, sample: undefined });
          }}
          onError={setError}
        />
      </div>
      <FilterExtras state={state} onChange={onChange} onError={setError} />
      {error ? (
        <p role="alert" className="text-xs text-red-600 dark:text-red-400">
          {error}
        </p>
      ) : null}
      {originChips.length > 0 ? (
        <ul aria-label="Origin filters" className="flex flex-wrap gap-2">
          {originChips.map(({ id, text, remove }) => (
            <li
              key={id}
              data-testid="filter-chip"
              className="inline-flex items-center gap-1 rounded-full bg-amber-50 py-0.5 pl-3 pr-1 text-xs font-medium text-amber-800 ring-1 ring-inset ring-amber-200 dark:bg-amber-950/60 dark:text-amber-300 dark:ring-amber-900"
            >
              <span className="font-mono">{text}</span>
              <button
                type="button"
                aria-label={`Remove filter ${text}`}
                className="grid size-5 place-items-center rounded-full hover:bg-amber-100 focus-visible:outline-2 focus-visible:outline-amber-500 dark:hover:bg-amber-900"
                onClick={() => onChange({ ...remove, offset: 0, sample: undefined })}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      {Object.keys(state.metadata).length > 0 ? (
        <ul aria-label="Metadata filters" className="flex flex-wrap gap-2">
          {Object.entries(state.metadata).map(([k, v]) => (
            <li
              key={k}
              data-testid="filter-chip"
              className="inline-flex items-center gap-1 rounded-full bg-indigo-50 py-0.5 pl-3 pr-1 text-xs font-medium text-indigo-700 ring-1 ring-inset ring-indigo-200 dark:bg-indigo-950/60 dark:text-indigo-300 dark:ring-indigo-900"
            >
              <span className="font-mono">{describeCondition(k, v)}</span>
              <button
                type="button"
                aria-label={`Remove filter ${describeCondition(k, v)}`}
                className="grid size-5 place-items-center rounded-full hover:bg-indigo-100 focus-visible:outline-2 focus-visible:outline-indigo-500 dark:hover:bg-indigo-900"
                onClick={() => {
                  const metadata = { ...state.metadata };
                  delete metadata[k];
                  onChange({ metadata, offset: 0, sample: undefined });
                }}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}
