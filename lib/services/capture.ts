// Capture: a completion recorded into one of the team's pipelines as a sample per finished
// choice (docs/api.md "Capture"). The pipeline is checked before anything is generated; the
// samples are written after the answer, through the add batcher, retried, and a write that
// still fails is logged and counted, never dropped silently.
import type { IncomingHttpHeaders } from "node:http";
import type postgres from "postgres";
import { CAPTURE_HEADERS, CaptureBody, type CaptureInput, type GenerationFacts } from "../contracts/capture";
import type { FinishReason, GenerationUsage } from "../contracts/generation";
import type { SampleMessage } from "../contracts/messages";
import { storableText } from "../contracts/text";
import type { DbOrTx } from "../db/client";
import { changeFeedOf } from "../db/change-feed";
import { rawSql } from "../db/raw";
import { ApiError, fromZodError, invalidRequest, notFound } from "../errors";
import { newId } from "../ids";
import { logger } from "../observe/log";
import { drainOnStop } from "../observe/stop-drain";
import { appMetrics, metricsEnabled } from "../observe/metrics";
import { storeSamples, type SampleToStore } from "./samples";

/**
 * The key a capture is asked with: its id goes into the samples' generation facts (`keyId`), so a
 * data owner can tell which key wrote them; a model key's `capturePipelines` (null: any pipeline
 * of the team, []: none) is checked before the pipeline is looked up.
 */
export type CaptureKey = { id: string; capturePipelines?: string[] | null };

/** Where a captured completion goes: a pipeline of the caller's team, with the sample's labels. */
export type CaptureTarget = {
  teamId: string;
  pipelineId: string;
  userId?: string;
  groupId?: string;
  metadata?: Record<string, string>;
};

/** A capture as the completion carries it: the target, the conversation so far, and who serves it. */
export type CaptureRequest = CaptureTarget & {
  /** The request's messages (chat), or the prompt as one user message. */
  messages: SampleMessage[];
  /** With `echo`, each choice's text starts with the prompt: the sample holds what follows. */
  echoedPrefix?: string;
  facts: Pick<GenerationFacts, "endpoint" | "deployment" | "deploymentId" | "model" | "requestId" | "keyId">;
};

/** One finished choice of a completion. */
export type FinishedChoice = { index: number; text: string; finish_reason: FinishReason; stop: string | null };

// ---- asking for it ----

/**
 * The capture the request asks for: the body field, or the X-Pipeline-* headers. Both at once is
 * a 400 naming `pipeline` (docs/api.md: one form per request, never a silent choice between them).
 * A header form without X-Pipeline-Id, or with metadata that is not a JSON object, is a 400 naming
 * the header.
 */
export function requestedCapture(
  body: CaptureInput | undefined,
  headers: RequestHeaders,
): { capture: CaptureInput; param: string } | undefined {
  const fromHeaders = captureFromHeaders(headers);
  if (body && fromHeaders)
    throw invalidRequest(
      "Give the capture either as the 'pipeline' body field or as X-Pipeline-* headers, not both.",
      "pipeline",
    );
  if (body) return { capture: body, param: "pipeline.id" };
  if (fromHeaders) return { capture: fromHeaders, param: CAPTURE_HEADERS.id };
  return undefined;
}

/**
 * A request's headers: a web request's (App Router), or a Node request's (the Pages Router API
 * routes, lowercase names; a repeated header is already one value joined with ", ", as in Headers).
 */
export type RequestHeaders = Headers | IncomingHttpHeaders;

function headerValue(headers: RequestHeaders, name: string): string | null {
  if (headers instanceof Headers) return headers.get(name);
  const v = headers[name.toLowerCase()];
  if (v === undefined) return null;
  return Array.isArray(v) ? v.join(", ") : v;
}

/** The header form as a CaptureInput (validated like the body field), or undefined without one. */
export function captureFromHeaders(headers: RequestHeaders): CaptureInput | undefined {
  const raw: Record<string, unknown> = {};
  let any = false;
  for (const [field, name] of Object.entries(CAPTURE_HEADERS)) {
    const v = headerValue(headers, name);
    if (v === null) continue;
    any = true;
    if (field !== "metadata") raw[field] = v;
    else {
      try {
        raw.metadata = JSON.parse(v);
      } catch {
        throw invalidRequest(`Invalid '${name}': must be a JSON object of strings.`, name);
      }
      if (raw.metadata === null || typeof raw.metadata !== "object" || Array.isArray(raw.metadata))
        throw invalidRequest(`Invalid '${name}': must be a JSON object of strings.`, name);
    }
  }
  if (!any) return undefined;
  if (raw.id === undefined)
    throw invalidRequest(
      `'${CAPTURE_HEADERS.id}' is required with the other X-Pipeline-* headers.`,
      CAPTURE_HEADERS.id,
    );
  const parsed = CaptureBody.safeParse(raw);
  if (parsed.success) return parsed.data;
  // Named as the client sent it: the header (metadata's key path follows it).
  const issue = parsed.error.issues[0]!;
  const [field, ...rest] = issue.path;
  const header = CAPTURE_HEADERS[field as keyof typeof CAPTURE_HEADERS];
  const detail = fromZodError(parsed.error).message.replace(/^Invalid '[^']*': /, "");
  const param = header + (rest.length ? ` ${rest.map(String).join(".")}` : "");
  throw invalidRequest(`Invalid '${param}': ${detail}`, header);
}

/**
 * The capture's pipeline, checked before anything is generated: a pipeline of another team, a
 * deleted or an unknown one is a 404 naming `param` (`pipeline.id` or `X-Pipeline-Id`). Pipelines
 * found are cached per process, and dropped when any pipeline is deleted (change feed).
 */
export async function resolveCapture(
  db: DbOrTx,
  teamId: string,
  requested: { capture: CaptureInput; param: string },
  key?: CaptureKey,
): Promise<CaptureTarget> {
  const { id, userId, groupId, metadata } = requested.capture;
  // Before the lookup, and whether or not the pipeline exists: a model key's holder (often not a
  // member of the team) learns nothing of the team's other pipelines.
  const scope = key?.capturePipelines;
  if (scope && !scope.includes(id))
    throw new ApiError(
      403,
      "forbidden",
      scope.length === 0
        ? "This model key may not capture completions into pipelines."
        : `This model key may capture only into ${scope.map((p) => `'${p}'`).join(", ")}.`,
      requested.param,
    );
  const found = await cachedPipeline(rawSql(db), teamId, id);
  if (!found) throw notFound(`No pipeline with id '${id}'.`, requested.param);
  return { teamId, pipelineId: id, userId, groupId, metadata };
}

/**
 * The capture of a deployment completion (POST, or the GET stream): the pipeline checked, the
 * prompt as the sample's user message; undefined when none was asked for.
 */
export async function deploymentCapture(
  db: DbOrTx,
  input: {
    requested: { capture: CaptureInput; param: string } | undefined;
    team: { id: string; slug: string };
    deployment: { id: string; name: string; model: string };
    prompt: string;
    echo?: boolean;
    requestId: string;
    /** The endpoint named in the sample's generation facts (default: the deployment's own). */
    endpoint?: "deployment" | "completions";
    /** The API or model key asking (absent on the dashboard's playground). */
    key?: CaptureKey;
  },
): Promise<CaptureRequest | undefined> {
  if (!input.requested) return undefined;
  const target = await resolveCapture(db, input.team.id, input.requested, input.key);
  return {
    ...target,
    messages: [{ role: "user", content: input.prompt }],
    echoedPrefix: input.echo ? input.prompt : undefined,
    facts: {
      endpoint: input.endpoint ?? "deployment",
      deployment: `${input.team.slug}/${input.deployment.name}`,
      deploymentId: input.deployment.id,
      model: input.deployment.model,
      requestId: input.requestId,
      ...(input.key ? { keyId: input.key.id } : {}),
    },
  };
}

const PIPELINE_CACHE = { tables: ["pipelines"], ttlMs: 60_000, maxEntries: 10_000 };

async function cachedPipeline(sql: postgres.Sql, teamId: string, id: string): Promise<boolean> {
  const load = async () =>
    (await sql`select 1 from pipelines where id = ${id} and team_id = ${teamId} and deleted_at is null`).length > 0;
  const feed = changeFeedOf(sql);
  if (!feed) return load();
  return feed.cache<string, boolean>("capture_pipelines", PIPELINE_CACHE).get(`${teamId}|${id}`, load, (ok) => ok);
}

// ---- storing it ----

/** The samples of a completion: one per choice that finished (stop or length). */
export function capturedSamples(
  req: CaptureRequest,
  choices: FinishedChoice[],
  usage: GenerationUsage,
  timing: { latencyMs: number; ttftMs?: number; streamed: boolean },
): SampleToStore[] {
  const messages = req.messages.map((m) =>
    typeof m.content === "string" ? { ...m, content: storableText(m.content) } : m,
  ) as SampleMessage[];
  const finished = choices.filter((c) => c.finish_reason !== "cancelled");
  return finished.map((c) => {
    const text =
      req.echoedPrefix !== undefined && c.text.startsWith(req.echoedPrefix)
        ? c.text.slice(req.echoedPrefix.length)
        : c.text;
    return {
      id: newId("sample"),
      teamId: req.teamId,
      pipelineId: req.pipelineId,
      sample: {
        messages: [...messages, { role: "assistant", content: storableText(text) }],
        userId: req.userId,
        groupId: req.groupId,
        metadata: req.metadata,
      },
      generation: {
        ...req.facts,
        index: c.index,
        n: choices.length,
        finishReason: c.finish_reason === "stop" ? "stop" : "length",
        // A stop string may hold what jsonb refuses (U+0000, half of a surrogate pair).
        stop: c.stop === null ? null : storableText(c.stop),
        promptTokens: usage.prompt_tokens,
        completionTokens: usage.completion_tokens,
        latencyMs: Math.round(timing.latencyMs * 10) / 10,
        ...(timing.ttftMs !== undefined ? { ttftMs: Math.round(timing.ttftMs * 10) / 10 } : {}),
        streamed: timing.streamed,
      },
    };
  });
}

type Holder = { pending: Set<Promise<void>>; pendingRows: number; exitHook?: boolean };
const holder = globalThis as unknown as { __lmpCapture?: Holder };
const state: Holder = (holder.__lmpCapture ??= { pending: new Set(), pendingRows: 0 });

/**
 * A stop (SIGTERM, SIGINT) waits for the writes under way (../observe/stop-drain.ts). A process
 * that exits otherwise, or whose writes outlast the drain, loses them: the exit says how many,
 * on the log, rather than nothing.
 */
function watchExit() {
  if (state.exitHook) return;
  state.exitHook = true;
  drainOnStop("capture", settleCaptures);
  process.once("exit", () => {
    if (state.pendingRows > 0)
      logger().error(
        { samples: state.pendingRows, completions: state.pending.size },
        "captured samples not stored: the process stopped before their write",
      );
  });
}

/**
 * Stores a finished completion's samples, off the request path: the write starts after the
 * current turn of the event loop (the answer, or the stream's last event, is sent first).
 */
export function captureCompletion(
  db: DbOrTx,
  req: CaptureRequest,
  choices: FinishedChoice[],
  usage: GenerationUsage,
  timing: { latencyMs: number; ttftMs?: number; streamed: boolean },
): void {
  const rows = capturedSamples(req, choices, usage, timing);
  if (rows.length === 0) return;
  watchExit();
  state.pendingRows += rows.length;
  const done: Promise<void> = new Promise<void>((resolve) => setImmediate(resolve))
    .then(() => storeWithRetry(rows, (r) => storeSamples(db, r), { requestId: req.facts.requestId }))
    .then(
      () => undefined,
      // storeWithRetry logs and counts its failures; this only guards against its own bugs.
      (err: unknown) => logger().error({ err, reqId: req.facts.requestId }, "capture failed"),
    )
    .finally(() => {
      state.pending.delete(done);
      state.pendingRows -= rows.length;
    });
  state.pending.add(done);
}

/** Waits for the capture writes under way (shutdown, tests, the bench). */
export async function settleCaptures(): Promise<void> {
  while (state.pending.size > 0) await Promise.allSettled([...state.pending]);
}

/** A unique violation on the samples' primary key: the row is there already. */
const alreadyStored = (err: unknown) =>
  typeof err === "object" &&
  err !== null &&
  (err as { code?: string }).code === "23505" &&
  (err as { constraint_name?: string }).constraint_name === "samples_pkey";

/** The delays before each retry of a failed write. */
export const CAPTURE_RETRY_DELAYS_MS = [50, 250, 1000, 4000] as const;

/**
 * Writes `rows`, retrying those that failed for a reason that may pass (a database error) after
 * each delay in turn. A retried row that is already there (its id taken: the earlier attempt had
 * committed after all) counts as stored. A row whose pipeline has gone meanwhile (404) is not retried. What is still
 * not stored at the end is logged (ids, pipeline, request id and error: never the content) and
 * counted in lmp_capture_write_failures_total. Returns the number of rows stored.
 */
export async function storeWithRetry(
  rows: SampleToStore[],
  write: (rows: SampleToStore[]) => Promise<PromiseSettledResult<string>[]>,
  options: { requestId: string; delaysMs?: readonly number[] },
): Promise<number> {
  const delays = options.delaysMs ?? CAPTURE_RETRY_DELAYS_MS;
  let todo = rows;
  let stored = 0;
  const failed: { row: SampleToStore; err: unknown; reason: "pipeline_gone" | "error" }[] = [];
  for (let attempt = 0; todo.length > 0; attempt++) {
    let settled: PromiseSettledResult<string>[];
    try {
      settled = await write(todo);
    } catch (err) {
      settled = todo.map(() => ({ status: "rejected", reason: err }));
    }
    const retry: SampleToStore[] = [];
    settled.forEach((r, i) => {
      const row = todo[i]!;
      if (r.status === "fulfilled" || (attempt > 0 && alreadyStored(r.reason))) stored++;
      else if (r.reason instanceof ApiError && r.reason.status === 404)
        failed.push({ row, err: r.reason, reason: "pipeline_gone" });
      else if (attempt < delays.length) retry.push(row);
      else failed.push({ row, err: r.reason, reason: "error" });
    });
    todo = retry;
    if (todo.length > 0) await new Promise((r) => setTimeout(r, delays[attempt]));
  }
  if (metricsEnabled() && stored > 0) appMetrics().captureStored.inc(stored);
  for (const f of failed) {
    logger().error(
      { reqId: options.requestId, pipelineId: f.row.pipelineId, reason: f.reason, err: f.err },
      "captured sample not stored",
    );
    if (metricsEnabled()) appMetrics().captureFailures.inc({ reason: f.reason });
  }
  return stored;
}
