// GET {deployment_url} takes its parameters from the query string, under the spec's names and
// under the example client's (text, length, stop_sequences as a URI-encoded JSON array).
import { ZodError } from "zod";
import { DeploymentStreamQuery, type DeploymentStreamInput } from "../contracts/deployments";
import { fromZodError, invalidRequest } from "../errors";

type Kind = "string" | "number" | "list";
/** Query name → body field and how its text is read. */
const NAMES: Record<string, { field: keyof DeploymentStreamInput; kind: Kind }> = {
  prompt: { field: "prompt", kind: "string" },
  text: { field: "prompt", kind: "string" },
  max_tokens: { field: "max_tokens", kind: "number" },
  length: { field: "max_tokens", kind: "number" },
  temperature: { field: "temperature", kind: "number" },
  top_p: { field: "top_p", kind: "number" },
  top_k: { field: "top_k", kind: "number" },
  repetition_penalty: { field: "repetition_penalty", kind: "number" },
  seed: { field: "seed", kind: "number" },
  stop: { field: "stop", kind: "list" },
  stop_sequences: { field: "stop_sequences", kind: "list" },
};

/** The bearer value of `?authorization=` (as "Bearer <key>" or the bare key), or null. */
export function queryAuthorization(url: URL): string | null {
  const v = url.searchParams.get("authorization")?.trim();
  if (!v) return null;
  return /^bearer\s/i.test(v) ? v : `Bearer ${v}`;
}

/** Reads and validates the query; a 400 names the parameter as the client spelled it. */
export function parseStreamQuery(params: URLSearchParams): DeploymentStreamInput {
  const raw: Record<string, unknown> = {};
  const spelledAs: Record<string, string> = {};
  for (const name of new Set(params.keys())) {
    if (name === "authorization") continue;
    const spec = NAMES[name];
    if (!spec) throw invalidRequest(`Unknown query parameter '${name}'.`, name);
    if (spec.field in raw) throw invalidRequest(`Give either '${spelledAs[spec.field]}' or '${name}', not both.`, name);
    const values = params.getAll(name);
    if (spec.kind !== "list" && values.length > 1) throw invalidRequest(`'${name}' is given more than once.`, name);
    raw[spec.field] = readValue(name, spec.kind, values);
    spelledAs[spec.field] = name;
  }
  const parsed = DeploymentStreamQuery.safeParse(raw);
  if (parsed.success) return parsed.data;
  throw renamed(parsed.error, spelledAs);
}

function readValue(name: string, kind: Kind, values: string[]): unknown {
  const v = values[0]!;
  if (kind === "string") return v;
  if (kind === "number") {
    // Anything that is not a plain decimal number (hex, binary, `Infinity`…) stays a string, so
    // validation names it as the wrong type.
    return /^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/.test(v) ? Number(v) : v;
  }
  // A JSON array of strings (`["a","b"]`, `[]`); anything else is one plain string, even one that
  // starts with "[" (stop=[INST], Llama 2's turn marker).
  if (values.length === 1 && /^\s*\[\s*["\]]/.test(v)) {
    try {
      return JSON.parse(v);
    } catch {
      throw invalidRequest(`'${name}' must be a JSON array of strings.`, name);
    }
  }
  return values; // stop=a&stop=b, or one plain string
}

/** The zod error with the parameter named as it appeared in the query (text, length…). */
function renamed(error: ZodError, spelledAs: Record<string, string>): Error {
  const issues = error.issues.map((i) => {
    const [head, ...rest] = i.path;
    return typeof head === "string" && spelledAs[head] ? { ...i, path: [spelledAs[head], ...rest] } : i;
  });
  return fromZodError(new ZodError(issues));
}
