"use client";

import { useState } from "react";
import { Field, Input, Select } from "../ui/field";

/** The create-dataset options as the form holds them (docs/api.md, "Dataset options"). */
export function optionsFromForm(data: FormData): Record<string, unknown> {
  const text = (name: string) => String(data.get(name) ?? "").trim();
  const format = text("format") || "jsonl";
  const tokenizer = text("tokenizer");
  return {
    format,
    ...(format === "jsonl" ? { compression: text("compression") || "none" } : {}),
    dedupe: data.get("dedupe") === "on",
    ...(data.get("validate") === "on" ? { validate: "openai-chat" } : {}),
    ...(data.get("split") === "on"
      ? {
          split: {
            validation: Number(text("validation")) / 100,
            seed: Number(text("splitSeed") || "0"),
            ...(text("splitBy") === "group" || text("splitBy") === "user" ? { by: text("splitBy") } : {}),
          },
        }
      : {}),
    ...(tokenizer ? { tokenizer } : {}),
    ...(tokenizer && text("maxTokens") ? { maxTokens: Number(text("maxTokens")) } : {}),
  };
}

const checkClass = "size-4 rounded border-zinc-300 text-indigo-600 focus:ring-indigo-500 dark:border-zinc-700";

function Check({
  name,
  label,
  hint,
  onChange,
}: {
  name: string;
  label: string;
  hint: string;
  onChange?: (on: boolean) => void;
}) {
  return (
    <label className="flex items-start gap-2 text-sm">
      <input
        type="checkbox"
        name={name}
        className={`mt-0.5 ${checkClass}`}
        onChange={(e) => onChange?.(e.target.checked)}
      />
      <span>
        <span className="font-medium">{label}</span>
        <span className="block text-xs text-zinc-500 dark:text-zinc-400">{hint}</span>
      </span>
    </label>
  );
}

/**
 * Every packaging option of create-dataset: format and compression, split, dedupe, validation,
 * and token counting with one of the team's deployments (with an optional maximum).
 */
export function DatasetOptionsFields({
  deployments,
  errors,
}: {
  deployments: string[];
  errors: Record<string, string>;
}) {
  const [format, setFormat] = useState("jsonl");
  const [split, setSplit] = useState(false);
  const [tokenizer, setTokenizer] = useState("");
  return (
    <fieldset className="space-y-4" data-testid="dataset-options">
      <legend className="sr-only">Packaging options</legend>
      <div className="grid grid-cols-2 gap-3">
        <Field id="dataset-format" label="Format" error={errors.format}>
          <Select id="dataset-format" name="format" value={format} onChange={(e) => setFormat(e.target.value)}>
            <option value="jsonl">JSONL</option>
            <option value="parquet">Parquet</option>
          </Select>
        </Field>
        <Field id="dataset-compression" label="Compression" error={errors.compression}>
          <Select id="dataset-compression" name="compression" disabled={format !== "jsonl"} defaultValue="none">
            <option value="none">None</option>
            <option value="gzip">gzip</option>
          </Select>
        </Field>
      </div>
      <div className="space-y-2">
        <Check
          name="dedupe"
          label="Remove duplicates"
          hint="Identical conversations (contents trimmed) are kept once, the oldest."
        />
        <Check
          name="validate"
          label="Validate for OpenAI chat fine-tuning"
          hint="Leave out conversations the format refuses; each reason is counted."
        />
        <Check
          name="split"
          label="Split off a validation set"
          hint="By a hash of each sample's id and the seed."
          onChange={setSplit}
        />
      </div>
      {split ? (
        <div className="grid grid-cols-2 gap-3">
          <Field id="dataset-validation" label="Validation share (%)" error={errors.split}>
            <Input id="dataset-validation" name="validation" type="number" min={1} max={99} defaultValue={10} />
          </Field>
          <Field id="dataset-split-seed" label="Split seed">
            <Input id="dataset-split-seed" name="splitSeed" type="number" min={0} defaultValue={0} />
          </Field>
          <Field
            id="dataset-split-by"
            label="Keep together"
            hint="Samples that share the key go to the same file: a conversation's turns (one groupId, or one request's n choices), or one user's samples (userId), so validation measures what training never saw."
          >
            <Select id="dataset-split-by" name="splitBy" defaultValue="sample">
              <option value="sample">Nothing (each sample on its own)</option>
              <option value="group">Each group</option>
              <option value="user">Each user</option>
            </Select>
          </Field>
        </div>
      ) : null}
      <div className="grid grid-cols-2 gap-3">
        <Field id="dataset-tokenizer" label="Count tokens with" error={errors.tokenizer}>
          <Select
            id="dataset-tokenizer"
            name="tokenizer"
            value={tokenizer}
            onChange={(e) => setTokenizer(e.target.value)}
          >
            <option value="">No token counts</option>
            {deployments.map((d) => (
              <option key={d} value={d}>
                {d}
              </option>
            ))}
          </Select>
        </Field>
        <Field id="dataset-max-tokens" label="Max tokens" error={errors.maxTokens}>
          <Input
            id="dataset-max-tokens"
            name="maxTokens"
            type="number"
            min={1}
            placeholder="no limit"
            disabled={!tokenizer}
          />
        </Field>
      </div>
    </fieldset>
  );
}
