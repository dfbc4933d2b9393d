import type { Metadata } from "next";
import { UsageView } from "@/components/usage/usage-view";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";

export const metadata: Metadata = { title: "Usage · LM Platform" };

export default async function UsagePage() {
  const { team } = await requireTeamContext("/usage");
  return (
    <>
      <PageHeader
        title="Usage"
        description={`Completions of the ${team.name} team: tokens and requests over time, by deployment and by key.`}
      />
      <UsageView />
    </>
  );
}
