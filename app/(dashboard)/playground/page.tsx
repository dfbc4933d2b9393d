import type { Metadata } from "next";
import { Playground } from "@/components/deployments/playground";
import { EmptyState } from "@/components/ui/states";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { getDb } from "@/lib/db/client";
import { listDeployments } from "@/lib/services/deployments";
import { listPipelines } from "@/lib/services/pipelines";
import { BACKEND_LABEL, unsupportedParams } from "@/lib/inference/backends/capabilities";

export const metadata: Metadata = { title: "Playground · LM Platform" };

export default async function PlaygroundPage({ searchParams }: { searchParams: Promise<{ deployment?: string }> }) {
  const { deployment } = await searchParams;
  const { team } = await requireTeamContext(
    `/playground${deployment ? `?deployment=${encodeURIComponent(deployment)}` : ""}`,
  );
  const [deploymentRows, pipelineRows] = await Promise.all([
    listDeployments(getDb().db, team.id),
    listPipelines(getDb().db, team.id),
  ]);
  const deployments = deploymentRows.map((d) => ({
    name: d.name,
    model: d.model,
    ...(d.upstreamKind
      ? { backend: BACKEND_LABEL[d.upstreamKind], unsupported: unsupportedParams(d.upstreamKind, "completions") }
      : {}),
  }));
  const pipelines = pipelineRows.map((p) => ({ id: p.id, name: p.name }));
  return (
    <>
      <PageHeader
        title="Playground"
        description="Try a deployment's sampling parameters and watch the tokens arrive."
      />
      {deployments.length === 0 ? (
        <EmptyState title="No deployments to try">
          <p>Create a deployment first; it appears here.</p>
        </EmptyState>
      ) : (
        <Playground
          deployments={deployments}
          pipelines={pipelines}
          initial={deployments.some((d) => d.name === deployment) ? deployment : undefined}
        />
      )}
    </>
  );
}
