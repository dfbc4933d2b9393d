"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useCallback, useEffect, useRef, useState } from "react";
import type { ImportDto } from "@/lib/contracts/imports";
import { uiFetch } from "../api-client";
import { pageTeamHeaders } from "../shell/page-team";
import { invalidatePipeline } from "./sample-count";
import { Button } from "../ui/button";
import { Dialog } from "../ui/dialog";
import { ErrorBanner } from "../ui/states";

/**
 * Imports a JSONL file into the pipeline: the upload's progress (XMLHttpRequest, which reports
 * it), then the worker's (lines read, imported, refused), polled until READY or FAILED. A running
 * import can be stopped (CANCELLED, what it stored stays), and an ended one links to its samples.
 */
export function ImportButton({ pipelineId }: { pipelineId: string }) {
  const [open, setOpen] = useState(false);
  const [file, setFile] = useState<File | null>(null);
  const [uploaded, setUploaded] = useState<number | null>(null);
  const [error, setError] = useState<string | undefined>();
  const [importId, setImportId] = useState<string | null>(null);
  const router = useRouter();
  const queryClient = useQueryClient();
  const xhrRef = useRef<XMLHttpRequest | null>(null);
  const progress = useQuery({
    queryKey: ["import", importId],
    queryFn: ({ signal }) => uiFetch<ImportDto>(`/api/ui/imports/${importId}`, { signal }),
    enabled: importId !== null,
    // Polled until it ends, or until the import cannot be read (its error is shown).
    refetchInterval: (q) =>
      q.state.status === "error" || (q.state.data && q.state.data.status !== "PROCESSING") ? false : 500,
  });
  const done = progress.data !== undefined && progress.data.status !== "PROCESSING";
  // An import of this pipeline still running (the page reloaded, or opened in another tab): the
  // button follows it, and the dialog shows its progress and can stop it.
  const runningElsewhere = useQuery({
    queryKey: ["imports", pipelineId, "PROCESSING"],
    queryFn: ({ signal }) =>
      uiFetch<ImportDto[]>(`/api/ui/imports?pipelineId=${encodeURIComponent(pipelineId)}&status=PROCESSING&limit=1`, {
        signal,
      }),
    enabled: importId === null,
  });
  // Imports this button has followed already: a list read before one ended is not taken up again.
  const followed = useRef(new Set<string>());
  useEffect(() => {
    const found = runningElsewhere.data?.[0];
    if (importId === null && found && !followed.current.has(found.id)) setImportId(found.id);
  }, [importId, runningElsewhere.data]);
  useEffect(() => {
    if (importId) followed.current.add(importId);
  }, [importId]);

  const upload = () => {
    if (!file) return setError("Choose a file.");
    setError(undefined);
    setUploaded(0);
    const xhr = new XMLHttpRequest();
    xhrRef.current = xhr;
    xhr.open("POST", `/api/ui/pipelines/${pipelineId}/import`);
    xhr.setRequestHeader("content-type", "application/x-ndjson");
    for (const [name, value] of Object.entries(pageTeamHeaders())) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (e) => setUploaded(e.loaded);
    xhr.onload = () => {
      xhrRef.current = null;
      setUploaded(null);
      const json = parsedBody(xhr.responseText);
      if (xhr.status === 202 && json) setImportId(json.id);
      else setError(json?.error?.message ?? `Upload failed (${xhr.status}).`);
    };
    xhr.onerror = () => {
      xhrRef.current = null;
      setError("The upload failed.");
      setUploaded(null);
    };
    xhr.send(file);
  };
  // Uploaded, the import runs in the worker: closing the dialog leaves it running (and polled),
  // and the button reopens it; the page shows the new samples once it ends.
  const running = importId !== null && !done && !progress.isError;
  // The new samples: the page's first render, and the table's and counts' cached queries. Once
  // per import, whether it ended with the dialog open or in the background.
  const shown = useRef<string | null>(null);
  const showSamples = useCallback(() => {
    if (!done || shown.current === importId) return;
    shown.current = importId;
    invalidatePipeline(queryClient, pipelineId);
    router.refresh();
  }, [done, importId, pipelineId, queryClient, router]);
  const reset = () => {
    setFile(null);
    setUploaded(null);
    setImportId(null);
    setError(undefined);
  };
  const close = () => {
    xhrRef.current?.abort(); // an upload still running stops: nothing is imported
    xhrRef.current = null;
    setOpen(false);
    showSamples();
    if (!running) reset();
  };
  // An import left running in the background has ended.
  useEffect(() => {
    if (!open) showSamples();
  }, [open, showSamples]);
  const [stopping, setStopping] = useState(false);
  // Stops the import: what it stored stays, and "Show its samples" finds it.
  const stop = async () => {
    setStopping(true);
    try {
      const stopped = await uiFetch<ImportDto>(`/api/ui/imports/${importId}/cancel`, { method: "POST" });
      queryClient.setQueryData(["import", importId], stopped);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setStopping(false);
    }
  };
  const d = progress.data;
  return (
    <>
      <Button
        variant="secondary"
        onClick={() => {
          if (done) reset(); // the last import's result was shown: a new one starts
          setOpen(true);
        }}
        data-testid="import-button"
      >
        {running ? "Importing…" : "Import JSONL"}
      </Button>
      <Dialog
        open={open}
        onClose={close}
        title="Import samples"
        description='A JSON Lines file: one add body per line ({"messages": [...], "userId": …}).'
        testId="import-dialog"
      >
        <div className="space-y-4 text-sm">
          <input
            type="file"
            accept=".jsonl,.ndjson,.gz,application/x-ndjson,application/gzip"
            aria-label="JSONL file"
            disabled={uploaded !== null || importId !== null}
            onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)}
          />
          {uploaded !== null && file ? (
            <Bar label="Uploading" value={uploaded} max={file.size} testId="upload-progress" />
          ) : null}
          {d ? (
            <div data-testid="import-progress" className="space-y-2">
              <Bar label={d.status === "PROCESSING" ? "Importing" : d.status} value={d.bytesRead} max={d.bytes} />
              <p>
                <span data-testid="import-status">{d.status}</span> · {d.linesRead.toLocaleString()} lines read ·{" "}
                {d.imported.toLocaleString()} imported · {d.refused.toLocaleString()} refused
              </p>
              {d.refusals.length > 0 ? (
                <ul className="max-h-32 overflow-y-auto font-mono text-xs text-zinc-500">
                  {d.refusals.slice(0, 20).map((r) => (
                    <li key={r.line}>
                      line {r.line}: {r.error.param ? `${r.error.param}: ` : ""}
                      {r.error.message}
                    </li>
                  ))}
                </ul>
              ) : null}
              {d.error ? <ErrorBanner message={d.error} /> : null}
            </div>
          ) : null}
          {progress.isError ? <ErrorBanner message={progress.error.message} /> : null}
          {error ? <ErrorBanner message={error} /> : null}
          <div className="flex justify-end gap-2">
            {done && d && d.imported > 0 ? (
              <Link
                href={`/pipelines/${pipelineId}?importId=${encodeURIComponent(d.id)}`}
                onClick={close}
                className="mr-auto self-center text-indigo-600 hover:underline dark:text-indigo-400"
              >
                Show its samples
              </Link>
            ) : null}
            {running && d ? (
              <Button variant="secondary" onClick={stop} disabled={stopping} data-testid="import-stop">
                {stopping ? "Stopping…" : "Stop import"}
              </Button>
            ) : null}
            <Button variant="secondary" onClick={close}>
              {done ? "Close" : running ? "Run in background" : "Cancel"}
            </Button>
            {importId === null ? (
              <Button onClick={upload} disabled={!file || uploaded !== null}>
                Import
              </Button>
            ) : null}
          </div>
        </div>
      </Dialog>
    </>
  );
}

/** The upload's answer, or null when it is not JSON (a proxy's page: its body limit, a timeout). */
function parsedBody(text: string): (ImportDto & { error?: { message?: string } }) | null {
  try {
    return JSON.parse(text || "null") as (ImportDto & { error?: { message?: string } }) | null;
  } catch {
    return null;
  }
}

function Bar({ label, value, max, testId }: { label: string; value: number; max: number; testId?: string }) {
  const pct = max > 0 ? Math.min(100, Math.round((value / max) * 100)) : 100;
  return (
    <div data-testid={testId}>
      <div className="mb-1 flex justify-between text-xs text-zinc-500">
        <span>{label}</span>
        <span>{pct}%</span>
      </div>
      <div
        role="progressbar"
        aria-valuenow={pct}
        aria-valuemin={0}
        aria-valuemax={100}
        className="h-2 rounded bg-zinc-200 dark:bg-zinc-800"
      >
        <div className="h-2 rounded bg-indigo-600" style={{ width: `${pct}%` }} />
      </div>
    </div>
  );
}
