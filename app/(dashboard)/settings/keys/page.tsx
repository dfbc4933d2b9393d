import type { Metadata } from "next";
import { CreateKeyButton } from "@/components/keys/create-key-dialog";
import { KeysTable } from "@/components/keys/keys-table";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { getDb } from "@/lib/db/client";
import { listApiKeys } from "@/lib/services/api-keys";
import { listDeployments } from "@/lib/services/deployments";
import { listPipelines } from "@/lib/services/pipelines";
import { toApiKeyDto } from "@/lib/ui/api-key-dto";

export const metadata: Metadata = { title: "API keys · LM Platform" };

export default async function KeysPage() {
  const { team } = await requireTeamContext("/settings/keys");
  const db = getDb().db;
  const [keys, deployments, pipelines] = await Promise.all([
    listApiKeys(db, team.id),
    listDeployments(db, team.id),
    listPipelines(db, team.id),
  ]);
  const pipelineNames = pipelines.map((p) => ({ id: p.id, name: p.name }));
  return (
    <>
      <PageHeader
        title="API keys"
        description={`Keys of the ${team.name} team. Secrets are shown once, when a key is created.`}
        actions={
          <CreateKeyButton
            deployments={deployments.map((d) => ({ id: d.id, name: d.name }))}
            pipelines={pipelineNames}
            canCreateApiKeys={team.role === "owner"}
          />
        }
      />
      <KeysTable initial={keys.map(toApiKeyDto)} pipelines={pipelineNames} canRevoke={team.role === "owner"} />
    </>
  );
}
