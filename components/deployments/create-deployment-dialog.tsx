"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { CreateDeploymentBody, type DeploymentDto } from "@/lib/contracts/deployments";
import { DTYPE_CHOICES } from "@/lib/contracts/models";
import { uiFetch } from "../api-client";
import { Button } from "../ui/button";
import { Dialog } from "../ui/dialog";
import { Field, Input, Select } from "../ui/field";
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
};

/** Owners deploy a model (a hub id or a folder on the workers' machines) in a dtype. */
export function CreateDeploymentButton() {
  const [open, setOpen] = useState(false);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const queryClient = useQueryClient();
  const create = useMutation({
    mutationFn: (body: unknown) => uiFetch<DeploymentDto>("/api/ui/deployments", { body }),
    onSuccess: () => {
      queryClient.invalidateQueries({ queryKey: ["deployments"] });
      close();
    },
    onError: (e: Error & { param?: string }) => setErrors(e.param ? { [e.param]: e.message } : { form: e.message }),
  });
  const close = () => {
    setOpen(false);
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
            const parsed = CreateDeploymentBody.safeParse(data);
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
