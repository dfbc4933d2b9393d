import type { Metadata } from "next";
import { CreateDeploymentButton } from "@/components/deployments/create-deployment-dialog";
import { DeploymentsTable } from "@/components/deployments/deployments-table";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { getDb } from "@/lib/db/client";
import { listDeploymentDtos } from "@/lib/services/deployments";

export const metadata: Metadata = { title: "Deployments · LM Platform" };

export default async function DeploymentsPage() {
  const { team } = await requireTeamContext("/deployments");
  const deployments = await listDeploymentDtos(getDb().db, team);
  return (
    <>
      <PageHeader
        title="Deployments"
        description="Models served to your applications, called with a model key."
        actions={team.role === "owner" ? <CreateDeploymentButton /> : undefined}
      />
      <DeploymentsTable initial={deployments} canManage={team.role === "owner"} />
    </>
  );
}
