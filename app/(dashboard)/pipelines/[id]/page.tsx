import type { Metadata } from "next";
import Link from "next/link";
import { notFound } from "next/navigation";
import { ImportButton } from "@/components/pipelines/import-button";
import { SelectionView } from "@/components/selection/selection-view";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { withQuerySlot } from "@/lib/limits/team-queries";
import { getDb, type Db } from "@/lib/db/client";
import { env } from "@/lib/env";
import { logger } from "@/lib/observe/log";
import { SelectionBody } from "@/lib/contracts/pipelines";
import { ApiError } from "@/lib/errors";
import { listDeployments } from "@/lib/services/deployments";
import { getPipeline } from "@/lib/services/pipelines";
import { streamSelection } from "@/lib/services/samples";
import {
  filterOf,
  pageKey,
  parseSelectionParams,
  selectionToSearch,
  type SelectionFilter,
} from "@/lib/ui/selection-params";

export const metadata: Metadata = { title: "Pipeline · LM Platform" };

type Props = {
  params: Promise<{ id: string }>;
  searchParams: Promise<Record<string, string | string[] | undefined>>;
};

export default async function PipelinePage({ params, searchParams }: Props) {
  const { id } = await params;
  const state = parseSelectionParams(await searchParams);
  const search = selectionToSearch(state);
  const { team } = await requireTeamContext(`/pipelines/${id}${search ? `?${search}` : ""}`);
  const db = getDb().db;
  const pipeline = await getPipeline(db, { teamId: team.id, id }).catch((err) => {
    if (err instanceof ApiError && err.status === 404) notFound();
    throw err;
  });
  // First paint: the page the URL asks for (the count follows from the client). A URL whose
  // filter the API refuses (a sample size past its limit, say) paints no page: the client asks
  // for it and shows the API's error, rather than this page failing as a whole.
  // In one of the team's selection query slots, as the API's and the dashboard's own listings:
  // reloads of a costly URL would otherwise hold the pool's connections past the team's share.
  // Slots all taken for too long, or a query that fails (its statement timeout on a costly
  // filter, say): no first page. The client then asks, and shows the API's error under the filter
  // bar, so the filter can be changed; the whole page failing would leave only a hand-edited URL.
  const { samples, hasSamples } = await withQuerySlot(team.id, async () => {
    const samples = await list(db, pipeline.id, { ...filterOf(state), limit: state.limit, offset: state.offset });
    // Whether the pipeline has any sample at all (its empty state), without counting them.
    const hasSamples = (samples?.length ?? 0) > 0 || ((await list(db, pipeline.id, { limit: 1 })) ?? []).length > 0;
    return { samples, hasSamples };
  }).catch((err: unknown) => {
    if (!(err instanceof ApiError && err.status === 429))
      logger().warn({ err, pipelineId: pipeline.id }, "pipeline page: first page not loaded");
    return { samples: null, hasSamples: true };
  });
  const deployments = (await listDeployments(db, team.id)).map((d) => d.name);
  return (
    <>
      <nav aria-label="Breadcrumb" className="mb-2 text-sm text-zinc-500 dark:text-zinc-400">
        <Link href="/pipelines" className="hover:text-zinc-900 hover:underline dark:hover:text-zinc-100">
          Pipelines
        </Link>{" "}
        / <span className="font-mono text-xs">{pipeline.id}</span>
      </nav>
      <PageHeader
        title={pipeline.name}
        description="Filter the samples, open one to read the conversation."
        actions={<ImportButton pipelineId={pipeline.id} />}
      />
      <SelectionView
        pipelineId={pipeline.id}
        publicUrl={env().PUBLIC_URL}
        initial={{
          key: samples ? JSON.stringify(pageKey(pipeline.id, state)) : "",
          page: { samples: samples ?? [] },
          hasSamples,
        }}
        deployments={deployments}
      />
    </>
  );
}

/** The selection's first page, or null when the API would refuse the selection (a 400). */
async function list(db: Db, pipelineId: string, body: SelectionFilter & { limit: number; offset?: number }) {
  const parsed = SelectionBody.safeParse(body);
  if (!parsed.success) return null;
  const selection = parsed.data;
  const samples = [];
  // The first page as the UI route gives it: with the captured completions' generation facts.
  for await (const s of streamSelection(db, { pipelineId, selection, batch: body.limit, withGeneration: true }))
    samples.push(s);
  return samples;
}
