"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { CreateKeyBody, type ApiKeyDto } from "@/lib/contracts/api-keys";
import { uiFetch } from "../api-client";
import { Button } from "../ui/button";
import { CopyButton } from "../ui/copy-button";
import { Dialog } from "../ui/dialog";
import { Field, Input, Select } from "../ui/field";
import { fieldErrors } from "../ui/form-errors";
import { ErrorBanner } from "../ui/states";

type Deployment = { id: string; name: string };
type Pipeline = { id: string; name: string };

/** The capture select's value as the API's `capturePipelines`: "" any (null), "none" ([]), or one id. */
const captureScope = (v: string | undefined) => (!v ? null : v === "none" ? [] : [v]);
type Created = { key: ApiKeyDto; secret: string };

/** `canCreateApiKeys`: owners only (an API key can do whatever an owner can); members create model keys. */
export function CreateKeyButton({
  deployments,
  pipelines,
  canCreateApiKeys,
}: {
  deployments: Deployment[];
  pipelines: Pipeline[];
  canCreateApiKeys: boolean;
}) {
  const firstKind = canCreateApiKeys ? "api" : "model";
  const [open, setOpen] = useState(false);
  const [kind, setKind] = useState<"api" | "model">(firstKind);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [created, setCreated] = useState<Created | null>(null);
  const queryClient = useQueryClient();
  const create = useMutation({
    mutationFn: (body: unknown) => uiFetch<Created>("/api/ui/keys", { body }),
    onSuccess: (c) => {
      setCreated(c);
      queryClient.invalidateQueries({ queryKey: ["keys"] });
    },
    onError: (e) => setErrors({ form: e.message }),
  });
  const close = () => {
    setOpen(false);
    setCreated(null);
    setErrors({});
    setKind(firstKind);
    create.reset();
  };
  return (
    <>
      <Button onClick={() => setOpen(true)}>Create key</Button>
      <Dialog
        open={open}
        onClose={close}
        dismissible={!created && !create.isPending}
        title={created ? "Copy your new key" : "Create a key"}
        description={
          created
            ? undefined
            : "API keys call the hosted API (/v1). Model keys call deployments and can be limited to one."
        }
        testId="create-key-dialog"
      >
        {created ? (
          <div className="space-y-4">
            <div
              role="alert"
              className="rounded-md border border-amber-200 bg-amber-50 px-3 py-2 text-sm text-amber-900 dark:border-amber-900/60 dark:bg-amber-950/40 dark:text-amber-200"
            >
              This is the only time the secret is shown. Store it somewhere safe: it cannot be recovered, only revoked
              and replaced.
            </div>
            <div className="flex items-center gap-2">
              <code
                data-testid="new-key-secret"
                className="min-w-0 flex-1 break-all rounded-md bg-zinc-100 px-3 py-2 font-mono text-xs dark:bg-zinc-800"
              >
                {created.secret}
              </code>
              <CopyButton text={created.secret} label="Copy key" />
            </div>
            <div className="flex justify-end">
              <Button onClick={close}>Done</Button>
            </div>
          </div>
        ) : (
          <form
            noValidate
            className="space-y-4"
            onSubmit={(e) => {
              e.preventDefault();
              const data = Object.fromEntries(new FormData(e.currentTarget)) as Record<string, string>;
              const body = {
                name: data.name || undefined,
                kind,
                deploymentId: kind === "model" ? data.deploymentId || undefined : undefined,
                capturePipelines: kind === "model" ? captureScope(data.capture) : undefined,
              };
              const parsed = CreateKeyBody.safeParse(body);
              if (!parsed.success) return setErrors(fieldErrors(parsed.error));
              setErrors({});
              create.mutate(body);
            }}
          >
            {errors.form ? <ErrorBanner message={errors.form} /> : null}
            <Field
              id="key-name"
              label="Label"
              error={errors.name}
              hint="So you can tell keys apart, e.g. 'prod backend'."
            >
              <Input id="key-name" name="name" autoFocus placeholder="prod backend" />
            </Field>
            <fieldset>
              <legend className="mb-1.5 text-sm font-medium text-zinc-800 dark:text-zinc-200">Kind</legend>
              <div className="grid grid-cols-2 gap-2">
                {(
                  [
                    ["api", "API key", "Pipelines, samples, datasets"],
                    ["model", "Model key", "Calls deployments"],
                  ] as const
                ).map(([value, label, hint]) => {
                  const locked = value === "api" && !canCreateApiKeys;
                  return (
                    <label
                      key={value}
                      className="flex cursor-pointer items-start gap-2 rounded-md border border-zinc-300 p-3 text-sm has-[:checked]:border-indigo-500 has-[:checked]:bg-indigo-50/60 has-[:disabled]:cursor-not-allowed has-[:disabled]:opacity-60 dark:border-zinc-700 dark:has-[:checked]:bg-indigo-950/40"
                    >
                      <input
                        type="radio"
                        name="kind"
                        value={value}
                        checked={kind === value}
                        disabled={locked}
                        onChange={() => setKind(value)}
                        className="mt-0.5 accent-indigo-600"
                      />
                      <span>
                        <span className="block font-medium">{label}</span>
                        <span className="block text-xs text-zinc-500 dark:text-zinc-400">
                          {locked ? "Owners only: an API key can do whatever an owner can" : hint}
                        </span>
                      </span>
                    </label>
                  );
                })}
              </div>
            </fieldset>
            {kind === "model" ? (
              <Field
                id="key-deployment"
                label="Deployment"
                error={errors.deploymentId}
                hint={
                  deployments.length === 0 ? "No deployments yet: the key will work for any future one." : undefined
                }
              >
                <Select id="key-deployment" name="deploymentId" defaultValue="">
                  <option value="">All deployments of the team</option>
                  {deployments.map((d) => (
                    <option key={d.id} value={d.id}>
                      {d.name}
                    </option>
                  ))}
                </Select>
              </Field>
            ) : null}
            {kind === "model" ? (
              <Field
                id="key-capture"
                label="Capture"
                error={errors.capturePipelines}
                hint="Which pipelines the key's holder may record completions into (the pipeline field or X-Pipeline-Id header)."
              >
                <Select id="key-capture" name="capture" defaultValue="">
                  <option value="">Any pipeline of the team</option>
                  <option value="none">No pipeline: completions only</option>
                  {pipelines.map((p) => (
                    <option key={p.id} value={p.id}>
                      Only {p.name}
                    </option>
                  ))}
                </Select>
              </Field>
            ) : null}
            <div className="flex justify-end gap-2 pt-1">
              {/* Not while the key is being made: it would be made all the same, its secret shown later. */}
              <Button variant="secondary" onClick={close} disabled={create.isPending}>
                Cancel
              </Button>
              <Button type="submit" disabled={create.isPending}>
                {create.isPending ? "Creating…" : "Create key"}
              </Button>
            </div>
          </form>
        )}
      </Dialog>
    </>
  );
}
