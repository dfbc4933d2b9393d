import { CopyButton } from "../ui/copy-button";

/** The empty state of a pipeline: a request that works as is, with this pipeline's real id. */
export function addSampleCurl(publicUrl: string, pipelineId: string): string {
  const body = {
    messages: [
      { role: "user", content: "How do I reset my password?" },
      { role: "assistant", content: "Open Settings, then Security, and choose Reset password." },
    ],
    userId: "user-123",
    groupId: "support",
    metadata: { lang: "en" },
  };
  return [
    `curl -X POST ${publicUrl}/v1/pipelines/${pipelineId}/add \\`,
    `  -H "Authorization: Bearer $LMP_API_KEY" \\`,
    `  -H "Content-Type: application/json" \\`,
    `  -d '${JSON.stringify(body)}'`,
  ].join("\n");
}

export function AddSamplesHelp({ publicUrl, pipelineId }: { publicUrl: string; pipelineId: string }) {
  const curl = addSampleCurl(publicUrl, pipelineId);
  return (
    <div data-testid="empty-state" className="rounded-lg border border-dashed border-zinc-300 p-6 dark:border-zinc-700">
      <h2 className="text-base font-semibold">No samples yet</h2>
      <p className="mt-1 text-sm text-zinc-500 dark:text-zinc-400">
        Send conversations from your application with an API key (an owner of the team creates one under{" "}
        <a href="/settings/keys" className="font-medium text-indigo-600 hover:underline dark:text-indigo-400">
          API keys
        </a>
        ). This request adds one sample to this pipeline:
      </p>
      <div className="relative mt-4">
        <pre
          data-testid="add-sample-curl"
          className="whitespace-pre-wrap break-all rounded-md bg-zinc-950 p-4 pr-20 font-mono text-xs leading-relaxed text-zinc-100"
        >
          {curl}
        </pre>
        <CopyButton text={curl} label="Copy" className="absolute right-2 top-2" />
      </div>
    </div>
  );
}
