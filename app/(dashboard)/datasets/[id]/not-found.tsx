import Link from "next/link";

export default function DatasetNotFound() {
  return (
    <div className="mx-auto max-w-lg py-16 text-center">
      <h1 className="text-lg font-semibold">Dataset not found</h1>
      <p className="mt-2 text-sm text-zinc-500 dark:text-zinc-400">
        It does not exist, was deleted, or belongs to another team.
      </p>
      <Link
        href="/datasets"
        className="mt-6 inline-block text-sm font-medium text-indigo-600 hover:underline dark:text-indigo-400"
      >
        Back to datasets
      </Link>
    </div>
  );
}
