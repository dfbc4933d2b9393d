"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { CreateDeploymentBody, type DeploymentDto } from "@/lib/contracts/deployments";
import { DTYPE_CHOICES } from "@/lib/contracts/models";
import { UPSTREAM_KINDS, type UpstreamKind } from "@/lib/contracts/upstream";
import { uiFetch } from "../api-client";
import { Button } from "../ui/button";
import { Dialog } from "../ui/dialog";
import { Field, Input, Select } from "../ui/field";
import { serverFieldError } from "@/lib/ui/field-error";
import { fieldErrors } from "../ui/form-errors";
import { ErrorBanner } from "../ui/states";

const DTYPE_HINTS: Record<(typeof DTYPE_CHOICES)[number], string> = {
  auto: "auto: the publisher's choice, else the fastest file present for CPU",
  fp32: "fp32: model.onnx",
  fp16: "fp16: model_fp16.onnx",
  q8: "q8: model_quantized.onnx",
  int8: "int8: model_int8.onnx",
  uint8: "uint8: model_uint8.onnx",
  q4: "q4: model_q4.onnx",
  q4f16: "q4f16: model_q4f16.onnx",
  bnb4: "bnb4: model_bnb4.onnx",
  q2: "q2: model_q2.onnx (2-bit)",
  q2f16: "q2f16: model_q2f16.onnx (2-bit)",
};

const KIND_LABELS: Record<UpstreamKind, string> = {
  openai: "OpenAI-compatible",
  vllm: "vLLM",
  tgi: "TGI",
  llamacpp: "llama.cpp server",
  ollama: "Ollama",
};

/** The form's fields as the create body: a local model, or upstream servers (docs/api.md). */
function createBody(data: Record<string, string>): Record<string, unknown> {
  if (data.servedBy !== "upstream") return { name: data.name, model: data.model, dtype: data.dtype };
  const urls = (data.upstreamUrls ?? "")
    .split(/[\s,]+/)
    .map((u) => u.trim())
    .filter(Boolean);
  return {
    name: data.name,
    upstream: {
      kind: data.upstreamKind,
      urls,
      model: data.upstreamModel ?? "",
      ...(data.upstreamKey ? { key: data.upstreamKey } : {}),
    },
  };
}

/**
 * Owners deploy a model (a hub id or a folder on the workers' machines) in a dtype, or put
 * OpenAI-compatible servers (vLLM, TGI, llama.cpp, Ollama) behind a deployment.
 */
export function CreateDeploymentButton() {
  const [open, setOpen] = useState(false);
  const [servedBy, setServedBy] = useState<"workers" | "upstream">("workers");
  const [errors, setErrors] = useState<Record<string, string>>({});
  const queryClient = useQueryClient();
  const create = useMutation({
    mutationFn: (body: unknown) => uiFetch<DeploymentDto>("/api/ui/deployments", { body }),
    onSuccess: () => {
      queryClient.invalidateQueries({ queryKey: ["deployments"] });
      close();
    },
    onError: (e: Error & { param?: string }) => setErrors(serverFieldError(e, ["name", "model", "dtype", "upstream"])),
  });
  const close = () => {
    setOpen(false);
    setServedBy("workers");
    setErrors({});
    create.reset();
  };
  return (
    <>
      <Button onClick={() => setOpen(true)}>Deploy a model</Button>
      <Dialog
        open={open}
        onClose={close}
        title="Deploy a model"
        description="A hub id (org/name, optionally @revision) or a model folder on the workers' machines."
        testId="create-deployment-dialog"
      >
        <form
          noValidate
          className="space-y-4"
          onSubmit={(e) => {
            e.preventDefault();
            const data = Object.fromEntries(new FormData(e.currentTarget)) as Record<string, string>;
            const parsed = CreateDeploymentBody.safeParse(createBody(data));
            if (!parsed.success) return setErrors(fieldErrors(parsed.error));
            setErrors({});
            create.mutate(parsed.data);
          }}
        >
          {errors.form ? <ErrorBanner message={errors.form} /> : null}
          <Field
            id="deployment-name"
            label="Name"
            error={errors.name}
            hint="Part of its URL: lower-case, digits, - _ ."
          >
            <Input id="deployment-name" name="name" autoFocus placeholder="chat" />
          </Field>
          <Field id="deployment-served-by" label="Served by">
            <Select
              id="deployment-served-by"
              name="servedBy"
              value={servedBy}
              onChange={(e) => setServedBy(e.target.value === "upstream" ? "upstream" : "workers")}
            >
              <option value="workers">the workers (a model they load)</option>
              <option value="upstream">upstream servers (OpenAI-compatible: vLLM, TGI, llama.cpp, Ollama)</option>
            </Select>
          </Field>
          {servedBy === "workers" ? (
            <>
              <Field id="deployment-model" label="Model" error={errors.model}>
                <Input id="deployment-model" name="model" placeholder="onnx-community/Qwen2.5-0.5B-Instruct" />
              </Field>
              <Field id="deployment-dtype" label="Weights" error={errors.dtype}>
                <Select id="deployment-dtype" name="dtype" defaultValue="auto">
                  {DTYPE_CHOICES.map((d) => (
                    <option key={d} value={d}>
                      {DTYPE_HINTS[d]}
                    </option>
                  ))}
                </Select>
              </Field>
            </>
          ) : (
            <>
              <Field
                id="deployment-upstream-urls"
                label="Server URLs"
                error={errors.upstream}
                hint="One or more base URLs, comma separated; requests are balanced and fail over between them."
              >
                <Input
                  id="deployment-upstream-urls"
                  name="upstreamUrls"
                  placeholder="http://gpu-1:8000, http://gpu-2:8000"
                />
              </Field>
              <Field
                id="deployment-upstream-kind"
                label="Server kind"
                hint="Decides which sampling parameters it takes."
              >
                <Select id="deployment-upstream-kind" name="upstreamKind" defaultValue="vllm">
                  {UPSTREAM_KINDS.map((k) => (
                    <option key={k} value={k}>
                      {KIND_LABELS[k]}
                    </option>
                  ))}
                </Select>
              </Field>
              <Field id="deployment-upstream-model" label="Model name on the servers">
                <Input
                  id="deployment-upstream-model"
                  name="upstreamModel"
                  placeholder="meta-llama/Llama-3.1-8B-Instruct"
                />
              </Field>
              <Field
                id="deployment-upstream-key"
                label="API key of the servers (optional)"
                hint="Stored encrypted and never shown again."
              >
                <Input id="deployment-upstream-key" name="upstreamKey" type="password" autoComplete="off" />
              </Field>
            </>
          )}
          <div className="flex justify-end gap-2 pt-1">
            <Button variant="secondary" onClick={close}>
              Cancel
            </Button>
            <Button type="submit" disabled={create.isPending}>
              {create.isPending ? "Deploying…" : "Deploy"}
            </Button>
          </div>
        </form>
      </Dialog>
    </>
  );
}
