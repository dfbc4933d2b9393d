import type { Metadata } from "next";
import { DeploymentsTable } from "@/components/deployments/deployments-table";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { getDb } from "@/lib/db/client";
import { listDeployments, toDeploymentDto } from "@/lib/services/deployments";

export const metadata: Metadata = { title: "Deployments · LM Platform" };

export default async function DeploymentsPage() {
  const { team } = await requireTeamContext("/deployments");
  const deployments = (await listDeployments(getDb().db, team.id)).map((d) => toDeploymentDto(d, team.slug));
  return (
    <>
      <PageHeader title="Deployments" description="Models served to your applications, called with a model key." />
      <DeploymentsTable deployments={deployments} />
    </>
  );
}
