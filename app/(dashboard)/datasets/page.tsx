import type { Metadata } from "next";
import { DatasetsTable } from "@/components/datasets/datasets-table";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { getDb } from "@/lib/db/client";
import { listDatasets, toDatasetDto } from "@/lib/services/datasets";

export const metadata: Metadata = { title: "Datasets · LM Platform" };

export default async function DatasetsPage() {
  const { team } = await requireTeamContext("/datasets");
  const datasets = (await listDatasets(getDb().db, team.id)).map((d) => toDatasetDto(d, team.slug));
  return (
    <>
      <PageHeader title="Datasets" description="Selections packaged as JSONL files, one conversation per line." />
      <DatasetsTable initial={datasets} canDelete={team.role === "owner"} />
    </>
  );
}
