"use client";

import { useRouter } from "next/navigation";
import { useEffect, useRef, useState } from "react";
import { fieldErrors } from "../ui/form-errors";
import { PlaygroundBody, type PlaygroundParams } from "@/lib/ui/playground-query";
import { Button } from "../ui/button";
import { Card } from "../ui/card";
import { Field, Input, Select } from "../ui/field";
import { ErrorBanner, Spinner } from "../ui/states";
import { readEventStream } from "./sse-reader";
import { pageTeamHeaders } from "../shell/page-team";
import { TokenView, type StreamedToken } from "./token-view";

type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };
type Frame =
  | { index: number; completion: string; logprobs?: StreamedToken[] }
  | { index: number; completion: ""; finish_reason: "stop" | "length"; stop: string | null }
  | { usage: Usage }
  | { error: { message: string } };

const num = (v: FormDataEntryValue | null) => (v === null || String(v).trim() === "" ? undefined : Number(v));

/** A comma-separated list (`\n` for a newline); undefined when empty. */
function list(v: FormDataEntryValue | null): string[] | undefined {
  const items = String(v ?? "")
    .split(",")
    .map((s) => s.replace(/\\n/g, "\n"))
    .filter((s) => s.length > 0);
  return items.length > 0 ? items : undefined;
}

/** The logit bias field: a JSON object, or undefined when empty; the schema checks its shape. */
function jsonField(v: FormDataEntryValue | null): { value?: unknown; error?: string } {
  const text = String(v ?? "").trim();
  if (text === "") return {};
  try {
    return { value: JSON.parse(text) };
  } catch {
    return { error: 'Not valid JSON: write it as {"token": bias}, e.g. {" the": -100, "464": 5}.' };
  }
}

/**
 * Prompt, every sampling parameter of the deployment endpoint (but `n` and `echo`: one completion
 * is shown), and the completion streaming in token by token.
 */
export function Playground({
  deployments,
  pipelines = [],
  initial,
}: {
  /**
   * `unsupported`: the parameters its backend cannot honour on a prompt (an upstream server's kind,
   * lib/inference/backends/capabilities.ts); their controls are disabled, and never sent.
   */
  deployments: { name: string; model: string; backend?: string; unsupported?: string[] }[];
  /** "Save to pipeline": the team's pipelines a finished completion may be captured into. */
  pipelines?: { id: string; name: string }[];
  initial?: string;
}) {
  const router = useRouter();
  const [deployment, setDeployment] = useState(initial ?? deployments[0]?.name ?? "");
  const current = deployments.find((d) => d.name === deployment);
  const unsupported = new Set(current?.unsupported ?? []);
  /** A control's hint when the deployment's backend cannot honour its parameter. */
  const offHere = (param: string) => (unsupported.has(param) ? `Not on ${current?.backend} deployments.` : undefined);
  const ok = (param: string) => !unsupported.has(param);
  const [saveTo, setSaveTo] = useState("");
  const [saved, setSaved] = useState<string | null>(null);
  const [text, setText] = useState("");
  const [tokens, setTokens] = useState<StreamedToken[]>([]);
  const [status, setStatus] = useState<"idle" | "streaming" | "done">("idle");
  const [finish, setFinish] = useState<string | null>(null);
  const [usage, setUsage] = useState<Usage | null>(null);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [temperature, setTemperature] = useState(0.7);
  const [topP, setTopP] = useState(1);
  const [tfs, setTfs] = useState(1);
  const [withLogprobs, setWithLogprobs] = useState(true);
  const abort = useRef<AbortController | null>(null);
  // Leaving the page stops the generation (a stream read on in the background would spend the
  // member's concurrency and token budget, and save the sample they walked away from).
  useEffect(() => () => abort.current?.abort(), []);

  async function run(form: HTMLFormElement) {
    // One stream at a time: Ctrl+Enter submits even while the Generate button is disabled.
    if (abort.current) return;
    const d = new FormData(form);
    const bias = jsonField(d.get("logit_bias"));
    if (bias.error) return setErrors({ logit_bias: bias.error });
    // Disabled controls are not in the form data: a parameter the backend cannot honour is not sent.
    const params: PlaygroundParams = {
      prompt: String(d.get("prompt") ?? ""),
      max_tokens: num(d.get("max_tokens")),
      temperature,
      top_p: topP,
      top_k: num(d.get("top_k")),
      repetition_penalty: num(d.get("repetition_penalty")),
      seed: num(d.get("seed")),
      logprobs: withLogprobs && ok("logprobs") ? num(d.get("logprobs")) : undefined,
      tfs: tfs < 1 && ok("tfs") ? tfs : undefined,
      stop: list(d.get("stop")),
      bad_words: list(d.get("bad_words")),
      logit_bias: bias.value as PlaygroundParams["logit_bias"],
      pipeline: saveTo ? { id: saveTo } : undefined,
    };
    const parsed = PlaygroundBody.safeParse(params);
    if (!parsed.success) return setErrors(fieldErrors(parsed.error));
    setErrors({});
    setText("");
    setTokens([]);
    setFinish(null);
    setUsage(null);
    setSaved(null);
    setStatus("streaming");
    const controller = new AbortController();
    abort.current = controller;
    try {
      const res = await fetch(`/api/ui/deployments/${encodeURIComponent(deployment)}/stream`, {
        method: "POST",
        signal: controller.signal,
        headers: { ...pageTeamHeaders(), "content-type": "application/json" },
        body: JSON.stringify(params),
      });
      if (!res.ok) {
        const body = await res.json().catch(() => null);
        throw new Error(body?.error?.message ?? `The deployment answered ${res.status}.`);
      }
      for await (const data of readEventStream(res)) {
        if (data === "[DONE]") {
          if (saveTo) setSaved(pipelines.find((p) => p.id === saveTo)?.name ?? saveTo);
          break;
        }
        const frame = JSON.parse(data) as Frame;
        if ("error" in frame) throw new Error(frame.error.message);
        if ("usage" in frame) setUsage(frame.usage);
        else if ("finish_reason" in frame) setFinish(frame.stop ? `stop (“${frame.stop}”)` : frame.finish_reason);
        else {
          setText((t) => t + frame.completion);
          if (frame.logprobs) setTokens((ts) => [...ts, ...frame.logprobs!]);
        }
      }
    } catch (err) {
      if (!controller.signal.aborted) setErrors({ form: (err as Error).message });
    } finally {
      if (abort.current === controller) {
        setStatus("done");
        abort.current = null;
      }
    }
  }

  const streaming = status === "streaming";
  return (
    <form
      noValidate
      className="grid gap-6 lg:grid-cols-[22rem_1fr]"
      onSubmit={(e) => {
        e.preventDefault();
        run(e.currentTarget);
      }}
    >
      <Card className="space-y-4 p-5">
        <Field id="pg-deployment" label="Deployment">
          <Select
            id="pg-deployment"
            value={deployment}
            onChange={(e) => {
              setDeployment(e.target.value);
              // In the URL: a reload, or a shared link, opens the same deployment.
              router.replace(`/playground?deployment=${encodeURIComponent(e.target.value)}`, { scroll: false });
            }}
          >
            {deployments.map((d) => (
              <option key={d.name} value={d.name}>
                {d.name}
              </option>
            ))}
          </Select>
        </Field>
        <Field
          id="pg-save-to"
          label="Save to pipeline"
          error={errors.pipeline}
          hint="A finished completion is stored there as a sample (prompt and completion)."
        >
          <Select id="pg-save-to" value={saveTo} onChange={(e) => setSaveTo(e.target.value)}>
            <option value="">Don’t save</option>
            {pipelines.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </Select>
        </Field>
        <div className="grid grid-cols-2 gap-3">
          <Field id="pg-max-tokens" label="Max tokens" error={errors.max_tokens}>
            <Input id="pg-max-tokens" name="max_tokens" type="number" min={1} max={2048} defaultValue={32} />
          </Field>
          <Field id="pg-seed" label="Seed" error={errors.seed} hint={offHere("seed")}>
            <Input id="pg-seed" name="seed" type="number" min={0} placeholder="random" disabled={!ok("seed")} />
          </Field>
        </div>
        <Slider
          id="pg-temperature"
          label="Temperature"
          value={temperature}
          onChange={setTemperature}
          hint="0 = greedy"
        />
        <Slider id="pg-top-p" label="Top p" value={topP} onChange={setTopP} />
        <Slider
          id="pg-tfs"
          label="Tail-free sampling"
          value={tfs}
          onChange={setTfs}
          hint="1 = off"
          disabled={!ok("tfs")}
          note={offHere("tfs")}
        />
        <div className="grid grid-cols-2 gap-3">
          <Field id="pg-top-k" label="Top k" error={errors.top_k} hint={offHere("top_k")}>
            <Input id="pg-top-k" name="top_k" type="number" min={1} placeholder="off" disabled={!ok("top_k")} />
          </Field>
          <Field
            id="pg-repetition"
            label="Repetition penalty"
            error={errors.repetition_penalty}
            hint={offHere("repetition_penalty")}
          >
            <Input
              id="pg-repetition"
              name="repetition_penalty"
              type="number"
              min={1}
              step={0.05}
              placeholder="1 (off)"
              disabled={!ok("repetition_penalty")}
            />
          </Field>
        </div>
        <Field id="pg-stop" label="Stop sequences" error={errors.stop} hint="Comma-separated; \n for a newline.">
          <Input id="pg-stop" name="stop" placeholder="\n, The end" />
        </Field>
        <Field
          id="pg-bad-words"
          label="Bad words"
          error={errors.bad_words}
          hint={offHere("bad_words") ?? "Comma-separated; never generated."}
        >
          <Input id="pg-bad-words" name="bad_words" placeholder="darn, heck" disabled={!ok("bad_words")} />
        </Field>
        <Field
          id="pg-logit-bias"
          label="Logit bias"
          error={errors.logit_bias}
          hint={offHere("logit_bias") ?? "JSON: a token (or token id) → −100…100; −100 bans it."}
        >
          <Input
            id="pg-logit-bias"
            name="logit_bias"
            placeholder='{" the": -100, "464": 5}'
            className="font-mono"
            disabled={!ok("logit_bias")}
          />
        </Field>
        <div className="flex items-end gap-3">
          <label className="flex items-center gap-2 pb-2 text-sm font-medium">
            <input
              type="checkbox"
              checked={withLogprobs && ok("logprobs")}
              disabled={!ok("logprobs")}
              onChange={(e) => setWithLogprobs(e.target.checked)}
              className="size-4 accent-indigo-600"
            />
            Logprobs
          </label>
          <div className="flex-1">
            <Field id="pg-logprobs" label="Alternatives per token" error={errors.logprobs} hint={offHere("logprobs")}>
              <Select id="pg-logprobs" name="logprobs" defaultValue="3" disabled={!withLogprobs || !ok("logprobs")}>
                {[1, 2, 3, 4, 5].map((n) => (
                  <option key={n} value={n}>
                    {n}
                  </option>
                ))}
              </Select>
            </Field>
          </div>
        </div>
      </Card>
      <div className="space-y-4">
        <Field id="pg-prompt" label="Prompt" error={errors.prompt}>
          <textarea
            id="pg-prompt"
            name="prompt"
            rows={5}
            required
            defaultValue="Once upon a time"
            className="block w-full rounded-md border border-zinc-300 bg-white px-3 py-2 font-mono text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-2 focus:ring-indigo-500/30 dark:border-zinc-700 dark:bg-zinc-900"
            onKeyDown={(e) => {
              if (e.key === "Enter" && (e.metaKey || e.ctrlKey)) e.currentTarget.form?.requestSubmit();
            }}
          />
        </Field>
        <div className="flex items-center gap-2">
          <Button type="submit" disabled={streaming || !deployment}>
            {streaming ? "Generating…" : "Generate"}
          </Button>
          {streaming ? (
            <Button variant="secondary" onClick={() => abort.current?.abort()}>
              Stop
            </Button>
          ) : null}
          <span className="text-xs text-zinc-500 dark:text-zinc-400">Ctrl+Enter</span>
        </div>
        {errors.form ? <ErrorBanner message={errors.form} /> : null}
        <Card className="min-h-40 p-5" aria-live="polite" aria-busy={streaming}>
          <div className="mb-3 flex items-center justify-between text-xs text-zinc-500 dark:text-zinc-400">
            <span className="font-medium uppercase tracking-wide">Completion</span>
            <span data-testid="completion-meta">
              {streaming ? <Spinner label="Generating" /> : null}
              {finish ? `finish: ${finish}` : ""}
              {usage ? ` · ${usage.completion_tokens} tokens` : ""}
              {saved ? ` · saved to ${saved}` : ""}
            </span>
          </div>
          {tokens.length > 0 ? (
            <TokenView tokens={tokens} />
          ) : text ? (
            <p className="whitespace-pre-wrap font-mono text-sm leading-7" data-testid="completion-text">
              {text}
            </p>
          ) : (
            <p className="text-sm text-zinc-400">The completion appears here as it is generated.</p>
          )}
        </Card>
      </div>
    </form>
  );
}

function Slider({
  id,
  label,
  value,
  onChange,
  hint,
  disabled,
  note,
}: {
  id: string;
  label: string;
  value: number;
  onChange: (v: number) => void;
  hint?: string;
  disabled?: boolean;
  /** Shown under the slider (why it is disabled). */
  note?: string;
}) {
  return (
    <div className="space-y-1.5">
      <div className="flex items-center justify-between text-sm">
        <label htmlFor={id} className="font-medium">
          {label}
        </label>
        <span className="tabular-nums text-zinc-500 dark:text-zinc-400">
          {value.toFixed(2)}
          {hint ? <span className="ml-1 text-xs">({hint})</span> : null}
        </span>
      </div>
      <input
        id={id}
        type="range"
        min={0}
        max={1}
        step={0.01}
        value={value}
        onChange={(e) => onChange(Number(e.target.value))}
        disabled={disabled}
        className="w-full accent-indigo-600 disabled:opacity-50"
      />
      {note ? <p className="text-xs text-zinc-500 dark:text-zinc-400">{note}</p> : null}
    </div>
  );
}
