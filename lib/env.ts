import { randomBytes } from "node:crypto";
import { existsSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { parsePlacements } from "./contracts/placement";

/**
 * Configuration, validated once for every process (app, worker, CLI, launcher).
 * A wrong value stops start-up with a message that names the variable.
 */
const port = z.coerce.number().int().min(1).max(65535);
const positiveInt = z.coerce.number().int().positive();
/** An http(s) URL (zod's url() alone takes `localhost:3000` and `javascript:x`), or unset. */
const optionalUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\/[^/]/i.test(u), "must be an http:// or https:// URL")
  .optional()
  .or(z.literal("").transform(() => undefined));

/** A comma-separated list: its entries trimmed, the empty ones dropped, each through `each`. */
const commaList = (each: (entry: string) => string) =>
  z
    .string()
    .optional()
    .transform((v) =>
      (v ?? "")
        .split(",")
        .map((e) => e.trim())
        .filter(Boolean)
        .map(each),
    );

const EnvSchema = z.object({
  PORT: port.default(3000),
  PUBLIC_URL: optionalUrl,
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL")
    .optional()
    .or(z.literal("").transform(() => undefined)),
  DATA_DIR: z.string().min(1).default("./.data"),
  AUTH_SECRET: z.string().min(32, "must be at least 32 characters").optional(),
  /** Port of the embedded database when the launcher starts it (0 = any free port). */
  EMBEDDED_DB_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  /** At most 7 days: S3 presigned URLs cannot live longer. */
  SIGNED_URL_TTL_SECONDS: positiveInt.max(604_800, "must be at most 604800 (7 days)").default(3600),
  MAX_BODY_BYTES: positiveInt.default(1024 * 1024),
  /** Body limit of POST /v1/pipelines/:id/add-batch (up to 1,000 add bodies). */
  ADD_BATCH_MAX_BODY_BYTES: positiveInt.default(16 * 1024 * 1024),
  /** Request bodies one team may be sending to an app process at once (lib/limits/body-bytes.ts). */
  TEAM_BODY_BYTES_IN_FLIGHT: positiveInt.default(64 * 1024 * 1024),
  /** Largest JSONL file POST /v1/pipelines/:id/import takes (streamed to the blob store). */
  IMPORT_MAX_BYTES: positiveInt.default(1024 * 1024 * 1024),
  BLOB_DRIVER: z.enum(["local", "s3"]).default("local"),
  BLOB_DIR: z.string().min(1).optional(),
  S3_BUCKET: z.string().min(1).optional(),
  S3_ENDPOINT: optionalUrl,
  S3_REGION: z.string().min(1).default("us-east-1"),
  S3_ACCESS_KEY_ID: z.string().optional(),
  S3_SECRET_ACCESS_KEY: z.string().optional(),
  S3_FORCE_PATH_STYLE: z
    .enum(["true", "false", "1", "0"])
    .default("true")
    .transform((v) => v === "true" || v === "1"),
  WORKER_HOST: z.string().min(1).default("127.0.0.1"),
  /**
   * The URL the app reaches this worker at, when it is not `http://WORKER_HOST:port` (the worker
   * listens on every interface, or behind a port mapping). Required with WORKER_HOST=0.0.0.0 or ::.
   */
  WORKER_ADVERTISE_URL: optionalUrl,
  WORKER_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  WORKER_HEARTBEAT_SECONDS: positiveInt.default(5),
  /**
   * Whether a worker refuses a model that would not fit in the memory left (the deployment then
   * fails with `insufficient_memory`) rather than risk the OOM killer ending it. `off` to load anyway.
   */
  WORKER_MEMORY_CHECK: z.enum(["on", "off"]).default("on"),
  /**
   * The KV cache each model's batch may come to hold, in MiB (requests wait past it; one that alone
   * exceeds it is refused). Default: half the memory left once the model is loaded.
   */
  WORKER_KV_CACHE_MB: positiveInt.optional(),
  /**
   * Finished prompts' caches each model keeps for requests with exactly the same prompt, in MiB
   * (workers/engine/scheduler.ts, promptCacheBytes). 0: none.
   */
  WORKER_PROMPT_CACHE_MB: z.coerce.number().int().min(0).default(64),
  /** Whether the prompt cache also keeps finished chat answers, for the conversation's next turn. */
  WORKER_PROMPT_CACHE_ANSWERS: z.enum(["on", "off"]).default("on"),
  /**
   * Whether the prompt cache may also fill the KV cache budget's idle room, beyond
   * WORKER_PROMPT_CACHE_MB, giving it back as the batch needs it (scheduler.ts, promptCacheIdleKv).
   */
  WORKER_PROMPT_CACHE_IDLE: z.enum(["on", "off"]).default("on"),
  /**
   * Whether q8/int8/uint8 models batch their rows (their activations quantized row by row, the
   * weights kept twice in memory: workers/engine/model/row-quantization.ts). `off`: one pass per row.
   */
  WORKER_ROW_QUANTIZATION: z.enum(["on", "off"]).default("on"),
  /** The model hub (or a mirror serving its API); read by the engine (workers/engine/model/hub). */
  HF_ENDPOINT: optionalUrl,
  HF_TOKEN: z.string().optional(),
  HF_HUB_OFFLINE: z.enum(["", "0", "1", "true", "false", "yes", "no", "on", "off"]).optional(),
  /** App → worker: connecting, the start of the answer, and any silence within it (see InferenceClient). */
  WORKER_CONNECT_TIMEOUT_MS: positiveInt.default(5_000),
  WORKER_RESPONSE_TIMEOUT_MS: positiveInt.default(15_000),
  WORKER_IDLE_TIMEOUT_MS: positiveInt.min(300).default(30_000),
  /**
   * App → upstream servers of upstream deployments (lib/inference/backends/upstream.ts):
   * connecting, the answer's start (a streamed answer: about the first token), any silence within
   * it, and how long a URL that failed before answering is passed over.
   */
  UPSTREAM_CONNECT_TIMEOUT_MS: positiveInt.default(3_000),
  UPSTREAM_FIRST_BYTE_TIMEOUT_MS: positiveInt.default(60_000),
  UPSTREAM_IDLE_TIMEOUT_MS: positiveInt.default(60_000),
  UPSTREAM_AVOID_MS: positiveInt.default(10_000),
  /** How often counted usage is written to the database (lib/services/usage.ts). */
  USAGE_FLUSH_MS: positiveInt.default(2_000),
  /** How long a stopping app waits for writes still in memory: usage, captures (lib/observe/stop-drain.ts). */
  STOP_DRAIN_MS: positiveInt.default(10_000),
  /** Logs: level, and `json` to keep JSON lines on a terminal (lib/observe/log.ts). */
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  LOG_FORMAT: z.enum(["pretty", "json"]).optional(),
  /** `off`: no metrics are recorded (the ingest bench measures what they cost). */
  METRICS: z.enum(["on", "off"]).default("on"),
  /** GET /metrics: a bearer token to require; unset, it answers on loopback only. */
  METRICS_TOKEN: z.string().min(16, "must be at least 16 characters").optional(),
  /** Default rate limits and quotas (docs/api.md "Limits"); each team may override them. */
  RATE_LIMIT_REQUESTS_PER_MINUTE: positiveInt.default(60_000),
  RATE_LIMIT_TOKENS_PER_MINUTE: positiveInt.default(200_000),
  RATE_LIMIT_CONCURRENT_STREAMS: positiveInt.default(32),
  RATE_LIMIT_DATASET_JOBS: positiveInt.default(50),
  RATE_LIMIT_IMPORT_JOBS: positiveInt.default(10),
  RATE_LIMIT_MODEL_DEPLOYMENTS: positiveInt.default(5),
  /** Sign-in attempts per 15 minutes, per account and per client address. */
  SIGNIN_ATTEMPTS_PER_ACCOUNT: positiveInt.default(10),
  SIGNIN_ATTEMPTS_PER_ADDRESS: positiveInt.default(50),
  /** `open`: anyone may create an account (and a team); `invite`: only with an invite link, joining its team. */
  SIGN_UP: z.enum(["open", "invite"]).default("open"),
  /**
   * Proxies in front of the app whose X-Forwarded-For entries are trusted, counted from the right
   * (read by scripts/lib/app-server.mjs; validated here, with the rest, at start).
   */
  TRUST_PROXY_HOPS: z.coerce.number().int().min(0).default(1),
  /** How long `npm start`'s children may take to finish what is in flight when it stops. */
  SHUTDOWN_GRACE_SECONDS: positiveInt.default(30),
  /** Longest a database statement of the app may run (the packager's COPY has no limit). */
  DB_STATEMENT_TIMEOUT_MS: positiveInt.default(30_000),
  /** Selection queries (samples, count, delete-samples) one team runs at once per app process. */
  DB_QUERIES_PER_TEAM: positiveInt.default(3),
  /** How long a team's selection query waits for one of its slots before a 429. */
  DB_QUERY_WAIT_MS: positiveInt.default(30_000),
  /** Shared secret of the worker's internal API; derived from AUTH_SECRET when unset. */
  WORKER_SECRET: z.string().min(16, "must be at least 16 characters").optional(),
  /** Dataset packaging: a claimed job's lease, renewed while it runs; taken over once expired. */
  DATASET_LEASE_SECONDS: positiveInt.default(30),
  /** How often an idle worker looks for PROCESSING datasets. */
  DATASET_POLL_MS: positiveInt.default(1000),
  /** Claims of one dataset (crashed or failed tries included) before it becomes FAILED. */
  DATASET_MAX_ATTEMPTS: positiveInt.default(3),
  /** Testing only: a pause of DATASET_THROTTLE_MS after every DATASET_THROTTLE_SAMPLES samples, to kill a worker mid-file. */
  DATASET_THROTTLE_MS: z.coerce.number().int().min(0).default(0),
  DATASET_THROTTLE_SAMPLES: positiveInt.default(2000),
  /** Imports: a claimed import's lease (renewed while it runs), the idle poll, claims before FAILED. */
  IMPORT_LEASE_SECONDS: positiveInt.default(30),
  IMPORT_POLL_MS: positiveInt.default(1000),
  IMPORT_MAX_ATTEMPTS: positiveInt.default(5),
  /** Lines per import chunk: one transaction each, committed with the import's progress. */
  IMPORT_CHUNK_LINES: positiveInt.max(10_000).default(1000),
  /** Testing only: a pause after every import chunk, to stop a worker midway. */
  IMPORT_THROTTLE_MS: z.coerce.number().int().min(0).default(0),
  /** How often a worker runs retention, purges deleted pipelines and sweeps idempotency keys. */
  MAINTENANCE_INTERVAL_SECONDS: positiveInt.default(60),
  /** Hub downloads no deployment (or dataset being packaged) has named for this long are removed; 0: never. */
  HUB_CACHE_KEEP_HOURS: z.coerce.number().min(0).default(24),
  /** Bytes a hub download leaves free on the cache's disk (read by workers/engine/model/hub/hub-config.ts). */
  HUB_MIN_FREE_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(1024 ** 3),
  /**
   * Bytes the local blob store leaves free on its disk (imports, dataset files): a write that
   * would leave less stops with a 507, rather than filling the disk the embedded database shares.
   */
  BLOB_MIN_FREE_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(1024 ** 3),
  /** Samples per deletion transaction (retention, deleted pipelines, delete-samples). */
  DELETE_BATCH_SIZE: positiveInt.max(100_000).default(1000),
  /**
   * Which of the deployments table's models a worker loads: comma-separated `GLOB[@DTYPE]`
   * entries (lib/contracts/placement.ts); unset, every one.
   */
  WORKER_SERVES: z
    .string()
    .optional()
    .transform((v, ctx) => {
      try {
        return parsePlacements(v);
      } catch (e) {
        ctx.addIssue({ code: "custom", message: (e as Error).message });
        return z.NEVER;
      }
    }),
  /**
   * Comma-separated models a worker serves in addition to those of the deployments table: an
   * existing relative folder is made absolute here (a bare `org/name` is otherwise a hub id).
   */
  WORKER_MODELS: commaList((m) => (!path.isAbsolute(m) && existsSync(m) ? path.resolve(m) : m)),
  /**
   * Upstream hosts on this machine or link-local that owners may use in the dashboard
   * (lib/net/upstream-hosts.ts): comma-separated `host` or `host:port`. Default none.
   */
  UPSTREAM_ALLOWED_HOSTS: commaList((h) => h.toLowerCase()),
  /**
   * Comma-separated folders on the workers' machines from which owners may deploy model folders
   * in the dashboard (any folder inside them). Default none: the dashboard deploys hub ids, and
   * the operator's CLI deploys any folder.
   */
  MODEL_FOLDERS: commaList((m) => path.resolve(m)),
});

export type Env = z.infer<typeof EnvSchema> & {
  PUBLIC_URL: string;
  AUTH_SECRET: string;
  DATA_DIR: string;
  BLOB_DIR: string;
};

export class EnvError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EnvError";
  }
}

/** Parses an environment (default: process.env). Throws EnvError naming each bad variable. */
export function parseEnv(source: Record<string, string | undefined> = process.env): Env {
  const parsed = EnvSchema.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new EnvError(`Invalid configuration:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  const together: string[] = [];
  if (e.BLOB_DRIVER === "s3" && !e.S3_BUCKET) together.push("  S3_BUCKET: required when BLOB_DRIVER=s3");
  // One without the other fell back to the SDK's default credentials (an instance role, say).
  if (!e.S3_ACCESS_KEY_ID !== !e.S3_SECRET_ACCESS_KEY)
    together.push(
      `  ${e.S3_ACCESS_KEY_ID ? "S3_SECRET_ACCESS_KEY" : "S3_ACCESS_KEY_ID"}: set both S3 keys, or neither ` +
        "(the SDK's default credentials)",
    );
  // A worker listening on every interface would advertise http://0.0.0.0:port, which the app
  // would dial on its own machine.
  if (["0.0.0.0", "::", "[::]"].includes(e.WORKER_HOST) && !e.WORKER_ADVERTISE_URL)
    together.push(
      `  WORKER_ADVERTISE_URL: required with WORKER_HOST=${e.WORKER_HOST} (the URL the app reaches this worker at)`,
    );
  if (together.length > 0) throw new EnvError(`Invalid configuration:\n${together.join("\n")}`);
  const dataDir = path.resolve(/*turbopackIgnore: true*/ e.DATA_DIR);
  const resolved = {
    ...e,
    DATA_DIR: dataDir,
    BLOB_DIR: path.resolve(/*turbopackIgnore: true*/ e.BLOB_DIR ?? path.join(dataDir, "blobs")),
    PUBLIC_URL: (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ""),
  } as Env;
  // Read (or generated) only by a process that uses it: a worker, given only WORKER_SECRET by the
  // launcher, never touches DATA_DIR/auth-secret.
  let secret = e.AUTH_SECRET;
  Object.defineProperty(resolved, "AUTH_SECRET", {
    enumerable: true,
    get: () => (secret ??= readOrCreateSecret(dataDir)),
  });
  return resolved;
}

/**
 * AUTH_SECRET, when not configured, is generated once and kept in DATA_DIR (mode 0600). Written
 * whole to a file of its own, then linked into place (exclusive: of two processes, one secret):
 * before, a crash or a full disk between creating the file and writing it left it empty, and the
 * empty secret was used from then on.
 */
function readOrCreateSecret(dataDir: string): string {
  const file = path.join(dataDir, "auth-secret");
  if (existsSync(file)) return checkedSecret(file);
  mkdirSync(dataDir, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, randomBytes(32).toString("base64url") + "\n", { mode: 0o600 });
  try {
    linkSync(tmp, file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // A file system without hard links (exFAT, some network or container volumes): created in
    // place then, exclusively, with the whole secret in one write.
    if (code === "EPERM" || code === "ENOTSUP" || code === "ENOSYS" || code === "EOPNOTSUPP") {
      try {
        writeFileSync(file, readFileSync(tmp), { mode: 0o600, flag: "wx" });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      }
    } else if (code !== "EEXIST") throw err; // EEXIST: another process created it first: theirs
  } finally {
    rmSync(tmp, { force: true });
  }
  return checkedSecret(file);
}

function checkedSecret(file: string): string {
  const secret = readFileSync(file, "utf8").trim();
  if (secret.length < 32)
    throw new EnvError(
      `${file} holds ${secret.length ? "a secret too short" : "no secret"} (at least 32 characters are needed). ` +
        "Restore it from a backup, or delete it to generate a new one (every session then signs out, and " +
        "upstream deployments' keys must be given again).",
    );
  return secret;
}

let cached: Env | undefined;

/** The validated configuration of this process. */
export function env(): Env {
  cached ??= parseEnv();
  return cached;
}

/** For tests and the launcher, which change the environment before children read it. */
export function resetEnvCache(): void {
  cached = undefined;
}
