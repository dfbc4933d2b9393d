import type { Metadata } from "next";
import { CreatePipelineButton } from "@/components/pipelines/create-pipeline-dialog";
import { PipelinesTable } from "@/components/pipelines/pipelines-table";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { getDb } from "@/lib/db/client";
import { listPipelines, toPipelineDto } from "@/lib/services/pipelines";

export const metadata: Metadata = { title: "Pipelines · LM Platform" };

export default async function PipelinesPage() {
  const { team } = await requireTeamContext("/pipelines");
  const pipelines = (await listPipelines(getDb().db, team.id)).map(toPipelineDto);
  return (
    <>
      <PageHeader
        title="Pipelines"
        description="Chat samples your applications send, ready to filter and package into datasets."
        actions={pipelines.length > 0 ? <CreatePipelineButton /> : null}
      />
      <PipelinesTable initial={pipelines} />
    </>
  );
}
