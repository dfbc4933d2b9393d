"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { CreateDatasetBody, type DatasetDto } from "@/lib/contracts/datasets";
import { describeCondition, type SelectionFilter } from "@/lib/ui/selection-params";
import { uiFetch } from "../api-client";
import { Button } from "../ui/button";
import { Dialog } from "../ui/dialog";
import { Field, Input } from "../ui/field";
import { fieldErrors } from "../ui/form-errors";
import { ErrorBanner } from "../ui/states";
import { DatasetOptionsFields, optionsFromForm } from "./dataset-options-fields";

/** Packages the current selection (its filters, not the table's page) into a dataset. */
export function CreateDatasetButton({
  pipelineId,
  filter,
  count,
  deployments,
}: {
  pipelineId: string;
  filter: SelectionFilter;
  count: number | undefined;
  /** The team's deployment names, for token counting. */
  deployments: string[];
}) {
  const [open, setOpen] = useState(false);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const router = useRouter();
  const queryClient = useQueryClient();
  const create = useMutation({
    mutationFn: (body: unknown) => uiFetch<DatasetDto>(`/api/ui/pipelines/${pipelineId}/create-dataset`, { body }),
    onSuccess: () => {
      queryClient.invalidateQueries({ queryKey: ["datasets"] });
      router.push("/datasets");
    },
    onError: (e) => setErrors({ form: e.message }),
  });
  const summary = [
    filter.userId ? `userId = ${filter.userId}` : null,
    filter.groupId ? `groupId = ${filter.groupId}` : null,
    ...Object.entries(filter.metadata ?? {}).map(([k, v]) => describeCondition(k, v)),
    filter.search ? `search “${filter.search}”` : null,
    // In the viewer's time zone, as the filter bar takes them.
    filter.createdAfter ? `after ${new Date(filter.createdAfter).toLocaleString()}` : null,
    filter.createdBefore ? `before ${new Date(filter.createdBefore).toLocaleString()}` : null,
    filter.generation?.captured !== undefined ? (filter.generation.captured ? "captured" : "not captured") : null,
    filter.generation?.finishReason ? `finish reason ${filter.generation.finishReason}` : null,
    filter.generation?.keyId ? `key = ${filter.generation.keyId}` : null,
    filter.generation?.deployment ? `deployment = ${filter.generation.deployment}` : null,
    filter.importId ? `import = ${filter.importId}` : null,
    filter.sample ? `random ${filter.sample.size} (seed ${filter.sample.seed})` : null,
  ].filter(Boolean);
  // Until the datasets page has opened: a second click would ask for the same dataset again.
  const busy = create.isPending || create.isSuccess;
  const close = () => {
    setOpen(false);
    setErrors({});
  };
  return (
    <>
      <Button variant="secondary" size="sm" onClick={() => setOpen(true)} disabled={count === 0}>
        Create dataset
      </Button>
      <Dialog
        open={open}
        onClose={close}
        dismissible={!busy}
        title="Create a dataset"
        description="The selection is frozen now and packaged in the background."
        testId="create-dataset-dialog"
      >
        <form
          noValidate
          className="space-y-4"
          onSubmit={(e) => {
            e.preventDefault();
            const data = new FormData(e.currentTarget);
            const body = { name: String(data.get("name") ?? "").trim(), ...filter, ...optionsFromForm(data) };
            const parsed = CreateDatasetBody.safeParse(body);
            if (!parsed.success) return setErrors(fieldErrors(parsed.error));
            setErrors({});
            create.mutate(body);
          }}
        >
          {errors.form ? <ErrorBanner message={errors.form} /> : null}
          {strayError(errors) ? <ErrorBanner message={strayError(errors)!} /> : null}
          <Field id="dataset-name" label="Name" error={errors.name} hint="Lower-case letters, digits, '.', '_' or '-'.">
            <Input
              id="dataset-name"
              name="name"
              autoFocus
              placeholder="support-fr-2026"
              aria-invalid={errors.name ? true : undefined}
              onChange={() => errors.name && setErrors({})}
            />
          </Field>
          <div className="rounded-md bg-zinc-50 px-3 py-2 text-sm dark:bg-zinc-800/60" data-testid="dataset-summary">
            <div className="font-medium">
              {count === undefined ? "…" : count.toLocaleString("en-US")} sample{count === 1 ? "" : "s"}
            </div>
            <div className="mt-0.5 text-xs text-zinc-500 dark:text-zinc-400">
              {summary.length > 0 ? summary.join(" · ") : "Every sample of the pipeline"}
            </div>
          </div>
          <DatasetOptionsFields deployments={deployments} errors={errors} />
          <div className="flex justify-end gap-2">
            <Button variant="secondary" onClick={close} disabled={busy}>
              Cancel
            </Button>
            <Button type="submit" disabled={busy}>
              {busy ? "Creating…" : "Create dataset"}
            </Button>
          </div>
        </form>
      </Dialog>
    </>
  );
}

/** The dialog's own fields (the rest of the body is the page's selection, from its URL). */
const FIELDS = new Set(["form", "name", "format", "compression", "split", "tokenizer", "maxTokens"]);

/**
 * An error about the selection itself (a shared link's `sampleSize` past the limit, say): no
 * field of the dialog shows it, so it is said above them rather than the submit doing nothing.
 */
function strayError(errors: Record<string, string>): string | undefined {
  const stray = Object.entries(errors).find(([key]) => !FIELDS.has(key));
  return stray ? `The selection cannot be packaged: ${stray[0]}: ${stray[1]}` : undefined;
}
