"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { CreatePipelineBody, type PipelineDto } from "@/lib/contracts/pipelines";
import { uiFetch } from "../api-client";
import { Button } from "../ui/button";
import { Dialog } from "../ui/dialog";
import { Field, Input } from "../ui/field";
import { fieldErrors } from "../ui/form-errors";

export function CreatePipelineButton({ label = "New pipeline" }: { label?: string }) {
  const [open, setOpen] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const router = useRouter();
  const queryClient = useQueryClient();
  const create = useMutation({
    mutationFn: (body: { name: string }) => uiFetch<PipelineDto>("/api/ui/pipelines", { body }),
    onSuccess: (p) => {
      queryClient.invalidateQueries({ queryKey: ["pipelines"] });
      router.push(`/pipelines/${p.id}`);
    },
    onError: (e) => setError(e.message),
  });
  // Until the pipeline's page has opened: a second click would make a second pipeline.
  const busy = create.isPending || create.isSuccess;
  const close = () => {
    setOpen(false);
    setError(undefined);
  };
  return (
    <>
      <Button onClick={() => setOpen(true)}>{label}</Button>
      <Dialog
        open={open}
        onClose={close}
        dismissible={!busy}
        title="New pipeline"
        description="A pipeline collects the chat samples your application sends."
        testId="create-pipeline-dialog"
      >
        <form
          noValidate
          className="space-y-5"
          onSubmit={(e) => {
            e.preventDefault();
            const parsed = CreatePipelineBody.safeParse({ name: new FormData(e.currentTarget).get("name") });
            if (!parsed.success) return setError(fieldErrors(parsed.error).name);
            setError(undefined);
            create.mutate(parsed.data);
          }}
        >
          <Field id="pipeline-name" label="Name" error={error}>
            <Input
              id="pipeline-name"
              name="name"
              placeholder="support-chats"
              autoFocus
              aria-invalid={error ? true : undefined}
              aria-describedby={error ? "pipeline-name-error" : undefined}
            />
          </Field>
          <div className="flex justify-end gap-2">
            <Button variant="secondary" onClick={close} disabled={busy}>
              Cancel
            </Button>
            <Button type="submit" disabled={busy}>
              {busy ? "Creating…" : "Create pipeline"}
            </Button>
          </div>
        </form>
      </Dialog>
    </>
  );
}
