import type { Metadata } from "next";
import { UsageView } from "@/components/usage/usage-view";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";

export const metadata: Metadata = { title: "Usage · LM Platform" };

export default async function UsagePage() {
  // The page asked for, with its query (?days=7): proxy.ts names it.
  const { team } = await requireTeamContext();
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
