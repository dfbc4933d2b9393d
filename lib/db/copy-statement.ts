/**
 * A query with its parameters written in as literals, for the one statement that takes no
 * parameters: COPY. Strings become E'…' literals (backslash and quote escaped, whatever
 * standard_conforming_strings says); numbers must be finite. Only for SQL built here (the
 * placeholders `$n` must not occur inside the statement's own string literals).
 */
export function inlineParams(query: string, params: unknown[]): string {
  return query.replace(/\$(\d+)\b/g, (_, n: string) => literal(params[Number(n) - 1]));
}

function literal(value: unknown): string {
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  if (typeof value === "string") return `E'${value.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;
  if (value === null) return "null";
  throw new Error(`inlineParams: unsupported parameter ${typeof value}`);
}
