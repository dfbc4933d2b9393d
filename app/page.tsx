export default function Home() {
  return (
    <main className="mx-auto max-w-2xl p-10">
      <h1 className="text-2xl font-semibold">LM Platform</h1>
      <p className="mt-3 text-zinc-600 dark:text-zinc-400">
        The hosted API is served under <code>/v1</code>. See <code>docs/api.md</code> for every operation.
      </p>
    </main>
  );
}
