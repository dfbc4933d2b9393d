import type { Metadata } from "next";
import Link from "next/link";
import { notFound } from "next/navigation";
import { DatasetDetail } from "@/components/datasets/dataset-detail";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { getDb } from "@/lib/db/client";
import { ApiError } from "@/lib/errors";
import { getDataset, toDatasetDto } from "@/lib/services/datasets";

export const metadata: Metadata = { title: "Dataset · LM Platform" };

export default async function DatasetPage({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  const { team } = await requireTeamContext(`/datasets/${id}`);
  const dataset = await getDataset(getDb().db, { teamId: team.id, id }).catch((err) => {
    if (err instanceof ApiError && err.status === 404) notFound();
    throw err;
  });
  return (
    <>
      <nav aria-label="Breadcrumb" className="mb-2 text-sm text-zinc-500 dark:text-zinc-400">
        <Link href="/datasets" className="hover:text-zinc-900 hover:underline dark:hover:text-zinc-100">
          Datasets
        </Link>{" "}
        / <span className="font-mono text-xs">{dataset.id}</span>
      </nav>
      <PageHeader title={dataset.name} description={`${team.slug}/${dataset.name}`} />
      <DatasetDetail initial={toDatasetDto(dataset, team.slug)} />
    </>
  );
}
