"use client";

import { useState } from "react";
import type { MetadataCondition } from "@/lib/contracts/pipelines";
import { Button } from "../ui/button";
import { Input, Select } from "../ui/field";

const OPERATORS = [
  ["eq", "="],
  ["ne", "≠"],
  ["in", "in"],
  ["prefix", "starts with"],
  ["exists", "exists"],
  ["missing", "does not exist"],
] as const;
type Operator = (typeof OPERATORS)[number][0];

function conditionOf(op: Operator, value: string): MetadataCondition {
  switch (op) {
    case "eq":
      return value;
    case "ne":
      return { $ne: value };
    case "in":
      return { $in: value.split(",").map((v) => v.trim()) };
    case "prefix":
      return { $prefix: value };
    case "exists":
      return { $exists: true };
    case "missing":
      return { $exists: false };
  }
}

const labelClass = "mb-1 block text-xs font-medium text-zinc-600 dark:text-zinc-400";

/**
 * Adds one metadata condition: a key, an operator and (except for the two existence tests) a
 * value; `in` takes comma-separated values. `onAdd` returns an error message when the API's
 * schema refuses the condition.
 */
export function MetadataForm({
  onAdd,
  onError,
}: {
  onAdd: (key: string, condition: MetadataCondition) => string | void;
  onError: (message: string | undefined) => void;
}) {
  const [op, setOp] = useState<Operator>("eq");
  const needsValue = op !== "exists" && op !== "missing";
  return (
    <form
      aria-label="Add metadata filter"
      className="flex items-end gap-2"
      onSubmit={(e) => {
        e.preventDefault();
        const form = e.currentTarget;
        const data = new FormData(form);
        const key = String(data.get("key") ?? "").trim();
        if (!key) return onError("metadata: enter a key");
        const failed = onAdd(key, conditionOf(op, needsValue ? String(data.get("value") ?? "") : ""));
        if (failed) return onError(failed);
        form.reset();
        setOp("eq");
        (form.elements.namedItem("key") as HTMLInputElement).focus();
      }}
    >
      <div className="w-32">
        <label htmlFor="filter-meta-key" className={labelClass}>
          Metadata key
        </label>
        <Input id="filter-meta-key" name="key" placeholder="lang" />
      </div>
      <div className="w-36">
        <label htmlFor="filter-meta-op" className={labelClass}>
          Operator
        </label>
        <Select id="filter-meta-op" value={op} onChange={(e) => setOp(e.target.value as Operator)}>
          {OPERATORS.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </Select>
      </div>
      <div className="w-36">
        <label htmlFor="filter-meta-value" className={labelClass}>
          Value
        </label>
        <Input
          id="filter-meta-value"
          name="value"
          disabled={!needsValue}
          placeholder={op === "in" ? "en, fr" : needsValue ? "en" : "—"}
        />
      </div>
      <Button type="submit" variant="secondary">
        Add filter
      </Button>
    </form>
  );
}
