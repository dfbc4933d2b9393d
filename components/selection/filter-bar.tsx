"use client";

import { useState } from "react";
import { SelectionBody } from "@/lib/contracts/pipelines";
import type { SelectionState } from "@/lib/ui/selection-params";
import { Button } from "../ui/button";
import { Input } from "../ui/field";
import { fieldErrors } from "../ui/form-errors";

type Props = {
  state: SelectionState;
  onChange: (patch: Partial<SelectionState>) => void;
};

/** userId / groupId inputs (applied on Enter or when leaving the field) and metadata chips. */
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
  return (
    <div className="space-y-3" data-testid="filter-bar">
      <div className="flex flex-wrap items-end gap-3">
        {(["userId", "groupId"] as const).map((field) => (
          <LabelFilter key={field} field={field} value={state[field]} onApply={(v) => applyLabel(field, v)} />
        ))}
        <form
          aria-label="Add metadata filter"
          className="flex items-end gap-2"
          onSubmit={(e) => {
            e.preventDefault();
            const form = e.currentTarget;
            const data = new FormData(form);
            const key = String(data.get("key") ?? "").trim();
            const value = String(data.get("value") ?? "");
            if (!key) return setError("metadata: enter a key");
            const metadata = { ...state.metadata, [key]: value };
            const parsed = SelectionBody.safeParse({ metadata });
            if (!parsed.success) return setError(parsed.error.issues[0]?.message);
            setError(undefined);
            form.reset();
            (form.elements.namedItem("key") as HTMLInputElement).focus();
            onChange({ metadata, offset: 0, sample: undefined });
          }}
        >
          <div className="w-36">
            <label
              htmlFor="filter-meta-key"
              className="mb-1 block text-xs font-medium text-zinc-600 dark:text-zinc-400"
            >
              Metadata key
            </label>
            <Input id="filter-meta-key" name="key" placeholder="lang" />
          </div>
          <span className="pb-2 text-zinc-400" aria-hidden>
            =
          </span>
          <div className="w-36">
            <label
              htmlFor="filter-meta-value"
              className="mb-1 block text-xs font-medium text-zinc-600 dark:text-zinc-400"
            >
              Value
            </label>
            <Input id="filter-meta-value" name="value" placeholder="en" />
          </div>
          <Button type="submit" variant="secondary">
            Add filter
          </Button>
        </form>
      </div>
      {error ? (
        <p role="alert" className="text-xs text-red-600 dark:text-red-400">
          {error}
        </p>
      ) : null}
      {Object.keys(state.metadata).length > 0 ? (
        <ul aria-label="Metadata filters" className="flex flex-wrap gap-2">
          {Object.entries(state.metadata).map(([k, v]) => (
            <li
              key={k}
              data-testid="filter-chip"
              className="inline-flex items-center gap-1 rounded-full bg-indigo-50 py-0.5 pl-3 pr-1 text-xs font-medium text-indigo-700 ring-1 ring-inset ring-indigo-200 dark:bg-indigo-950/60 dark:text-indigo-300 dark:ring-indigo-900"
            >
              <span className="font-mono">
                {k} = {v}
              </span>
              <button
                type="button"
                aria-label={`Remove filter ${k} = ${v}`}
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

/** A text filter applied on Enter or blur; follows the URL when it changes (back, chips). */
function LabelFilter({
  field,
  value,
  onApply,
}: {
  field: "userId" | "groupId";
  value: string | undefined;
  onApply: (raw: string) => void;
}) {
  const [text, setText] = useState(value ?? "");
  const [seen, setSeen] = useState(value);
  if (seen !== value) {
    setSeen(value);
    setText(value ?? "");
  }
  return (
    <div className="w-48">
      <label htmlFor={`filter-${field}`} className="mb-1 block text-xs font-medium text-zinc-600 dark:text-zinc-400">
        {field}
      </label>
      <Input
        id={`filter-${field}`}
        value={text}
        placeholder="any"
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter") onApply(text);
        }}
        onBlur={() => onApply(text)}
      />
    </div>
  );
}
