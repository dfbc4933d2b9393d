import { expect } from "vitest";
import { ImportSchema, type ImportDto } from "@/lib/contracts/imports";

/** The HTTP client's shape (tests/helpers/context.ts's `client`, or one on another base URL). */
type Api = { get: (path: string) => Promise<{ status: number; json: any }> };

/** A JSONL body of `n` lines; every `refuseEvery`-th line (1-based) is refused for a different reason. */
export function jsonl(n: number, refuseEvery = 0): { text: string; refused: number[] } {
  const refused: number[] = [];
  const lines = Array.from({ length: n }, (_, i) => {
    const line = i + 1;
    if (refuseEvery && line % refuseEvery === 0) {
      refused.push(line);
      return line % (2 * refuseEvery) === 0
        ? "{not json"
        : JSON.stringify({ messages: [{ role: "robot", content: "x" }] });
    }
    return JSON.stringify({
      messages: [
        { role: "user", content: `line ${line}` },
        { role: "assistant", content: `answer ${line}` },
      ],
      metadata: { line: String(line) },
    });
  });
  return { text: lines.join("\n") + "\n", refused };
}

export const NDJSON = { "content-type": "application/x-ndjson" };

/** Polls an import until READY (or FAILED: a failure), collecting every state seen on the way. */
export async function waitForImport(
  api: Api,
  id: string,
  timeout = 120_000,
): Promise<{ done: ImportDto; seen: ImportDto[] }> {
  const seen: ImportDto[] = [];
  const deadline = Date.now() + timeout;
  for (;;) {
    const res = await api.get(`/v1/imports/${id}`);
    expect(res.status).toBe(200);
    const state = ImportSchema.strict().parse(res.json);
    seen.push(state);
    expect(state.status, state.error ?? "").not.toBe("FAILED");
    if (state.status === "READY") return { done: state, seen };
    if (Date.now() > deadline) throw new Error(`import ${id} not READY: ${JSON.stringify(state)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
