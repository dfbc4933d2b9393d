import { SchemaView, type Schema } from "./schema-view";

/** The parts of an OpenAPI 3.1 document the reference shows. */
type Parameter = { name: string; in: string; required?: boolean; description?: string; schema?: Schema };
type Operation = {
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema?: Schema }> };
  responses: Record<string, { description?: string; content?: Record<string, { schema?: Schema }> }>;
};
export type OpenApiDoc = {
  info: { title: string; description?: string };
  tags?: { name: string }[];
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
};

const METHOD_STYLE: Record<string, string> = {
  get: "bg-emerald-100 text-emerald-800 dark:bg-emerald-900/40 dark:text-emerald-300",
  post: "bg-indigo-100 text-indigo-800 dark:bg-indigo-900/40 dark:text-indigo-300",
  patch: "bg-amber-100 text-amber-800 dark:bg-amber-900/40 dark:text-amber-300",
  delete: "bg-rose-100 text-rose-800 dark:bg-rose-900/40 dark:text-rose-300",
};

/** The API reference: operations grouped by tag, each with its parameters, body and responses. */
export function ApiReference({ doc }: { doc: OpenApiDoc }) {
  const components = doc.components?.schemas ?? {};
  const operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ path, method, op })),
  );
  const tags = doc.tags?.map((t) => t.name) ?? [...new Set(operations.flatMap((o) => o.op.tags ?? []))];
  return (
    <div className="grid gap-8 lg:grid-cols-[12rem_1fr]">
      <nav aria-label="API sections" className="hidden text-sm lg:block">
        <ul className="sticky top-4 space-y-1">
          {tags.map((t) => (
            <li key={t}>
              <a
                href={`#${t}`}
                className="text-zinc-600 hover:text-zinc-900 dark:text-zinc-400 dark:hover:text-zinc-100"
              >
                {t}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <div className="min-w-0 space-y-10" data-testid="api-reference">
        {tags.map((tag) => (
          <section key={tag} id={tag} aria-labelledby={`${tag}-title`}>
            <h2 id={`${tag}-title`} className="mb-3 text-lg font-semibold">
              {tag}
            </h2>
            <div className="space-y-3">
              {operations
                .filter((o) => o.op.tags?.includes(tag))
                .map(({ path, method, op }) => (
                  <details
                    key={`${method} ${path}`}
                    data-testid="api-operation"
                    className="rounded-lg border border-zinc-200 bg-white dark:border-zinc-800 dark:bg-zinc-900"
                  >
                    <summary className="flex cursor-pointer items-center gap-3 px-4 py-2.5">
                      <span
                        className={`rounded px-1.5 py-0.5 font-mono text-xs font-semibold uppercase ${METHOD_STYLE[method] ?? ""}`}
                      >
                        {method}
                      </span>
                      <code className="font-mono text-sm">{path}</code>
                      <span className="ml-auto truncate text-sm text-zinc-500 dark:text-zinc-400">{op.summary}</span>
                    </summary>
                    <div className="space-y-4 border-t border-zinc-200 px-4 py-3 text-sm dark:border-zinc-800">
                      {op.description ? <p>{op.description}</p> : null}
                      <p className="text-xs text-zinc-500">
                        {op.security?.length
                          ? `Auth: Bearer ${Object.keys(op.security[0]!)[0] === "modelKey" ? "model key" : "API key"}`
                          : "No key"}
                      </p>
                      {op.parameters?.length ? (
                        <div>
                          <h3 className="mb-1 font-medium">Parameters</h3>
                          <ul className="space-y-1">
                            {op.parameters.map((p) => (
                              <li key={`${p.in}:${p.name}`} className="font-mono text-xs">
                                {p.name}{" "}
                                <span className="text-zinc-500">
                                  ({p.in}
                                  {p.required ? ", required" : ""})
                                </span>
                                {p.description ? (
                                  <span className="font-sans text-zinc-500"> — {p.description}</span>
                                ) : null}
                              </li>
                            ))}
                          </ul>
                        </div>
                      ) : null}
                      {Object.entries(op.requestBody?.content ?? {}).map(([type, c]) => (
                        <div key={type}>
                          <h3 className="mb-1 font-medium">
                            Body <span className="font-mono text-xs text-zinc-500">{type}</span>
                          </h3>
                          {c.schema ? <SchemaView schema={c.schema} components={components} /> : null}
                        </div>
                      ))}
                      <div>
                        <h3 className="mb-1 font-medium">Responses</h3>
                        <ul className="space-y-2">
                          {Object.entries(op.responses).map(([status, r]) => (
                            <li key={status}>
                              <span className="font-mono text-xs font-semibold">{status}</span>{" "}
                              <span className="text-zinc-600 dark:text-zinc-400">{r.description}</span>
                              {status.startsWith("2")
                                ? Object.entries(r.content ?? {}).map(([type, c]) =>
                                    c.schema && type === "application/json" ? (
                                      <SchemaView key={type} schema={c.schema} components={components} />
                                    ) : null,
                                  )
                                : null}
                            </li>
                          ))}
                        </ul>
                      </div>
                    </div>
                  </details>
                ))}
            </div>
          </section>
        ))}
      </div>
    </div>
  );
}
