// `npm run cli -- <command> [--flags]`: administration against the same database as the app,
// whether the app is running or not. Exit code 2 for usage errors, 1 for anything that failed.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { and, eq } from "drizzle-orm";
import type { DbHandle } from "@/lib/db/client";
import { deployments } from "@/lib/db/schema";
import { ApiError } from "@/lib/errors";
import { env, EnvError } from "@/lib/env";
import { createApiKey, listApiKeys, revokeApiKey } from "@/lib/services/api-keys";
import { DTYPE_CHOICES, dtypeChoiceError } from "@/lib/contracts/models";
import { shownUrl, UPSTREAM_KINDS, type UpstreamKind } from "@/lib/contracts/upstream";
import { createDeployment, deleteDeployment, deploymentUrl, listDeploymentDtos } from "@/lib/services/deployments";
import { LIMIT_FIELDS } from "@/lib/contracts/limits";
import { teamLimits } from "@/lib/limits";
import { createTeam, getTeamBySlug, setTeamLimits } from "@/lib/services/teams";
import { setMemberRole } from "@/lib/services/members";
import { createUser, hasOwner, setUserPassword, userByEmail } from "@/lib/services/users";
import { withAppDatabase } from "./lib/database";

class UsageError extends Error {}

type Command = {
  usage: string;
  flags: Record<string, { type: "string" | "boolean"; required?: boolean }>;
  /** Checks that need no database, before it is started. */
  before?: (f: Record<string, string | undefined>) => void;
  run: (h: DbHandle, f: Record<string, string | undefined>) => Promise<void>;
};

const commands: Record<string, Command> = {
  "team:create": {
    usage: "team:create --slug S [--name N]",
    flags: { slug: { type: "string", required: true }, name: { type: "string" } },
    run: async ({ db }, f) => {
      const team = await createTeam(db, { slug: f.slug!, name: f.name });
      console.log(`created team ${team.slug} (${team.id})`);
    },
  },
  "user:create": {
    usage:
      "user:create --email E (--password P | --password-stdin) --team S [--role owner|member]   # the team's first user is its owner by default",
    flags: {
      email: { type: "string", required: true },
      password: { type: "string" },
      "password-stdin": { type: "boolean" },
      team: { type: "string", required: true },
      role: { type: "string" },
    },
    run: async ({ db }, f) => {
      const password = passwordOf(f);
      const given = f.role === undefined ? undefined : roleOf(f.role);
      const team = await getTeamBySlug(db, f.team!);
      // A team made with team:create has no owner: its first user becomes one (before, every
      // user was a member, and no one could invite, make API keys or deploy, with no way out).
      const role = given ?? ((await hasOwner(db, team.id)) ? "member" : "owner");
      const user = await createUser(db, { email: f.email!, password, teamId: team.id, role });
      console.log(`created user ${user.email} (${user.id}) in team ${team.slug} as ${role}`);
    },
  },
  "user:set-password": {
    usage: "user:set-password --email E (--password P | --password-stdin)",
    flags: {
      email: { type: "string", required: true },
      password: { type: "string" },
      "password-stdin": { type: "boolean" },
    },
    run: async ({ db }, f) => {
      const user = await setUserPassword(db, { email: f.email!, password: passwordOf(f) });
      console.log(`set the password of ${user.email}; every session signed in before is signed out`);
    },
  },
  "member:role": {
    usage: "member:role --team S --email E --role owner|member",
    flags: {
      team: { type: "string", required: true },
      email: { type: "string", required: true },
      role: { type: "string", required: true },
    },
    run: async ({ db }, f) => {
      const role = roleOf(f.role!);
      const team = await getTeamBySlug(db, f.team!);
      const user = await userByEmail(db, f.email!);
      const { revokedKeys } = await setMemberRole(db, { teamId: team.id, userId: user.id, role });
      console.log(
        `${user.email} is now ${role} of team ${team.slug}` +
          (revokedKeys ? ` (${revokedKeys} API keys they made revoked)` : ""),
      );
    },
  },
  "key:create": {
    usage:
      "key:create --team S --kind api|model [--deployment NAME] [--capture any|none|PIPELINE_ID[,…]] [--name LABEL]",
    flags: {
      team: { type: "string", required: true },
      kind: { type: "string", required: true },
      deployment: { type: "string" },
      capture: { type: "string" },
      name: { type: "string" },
    },
    run: async ({ db }, f) => {
      if (f.kind !== "api" && f.kind !== "model") throw new UsageError("--kind must be 'api' or 'model'");
      if (f.deployment && f.kind !== "model") throw new UsageError("--deployment applies to model keys only");
      if (f.capture !== undefined && f.kind !== "model")
        throw new UsageError("--capture applies to model keys only (an API key may write to any pipeline)");
      const capturePipelines = captureScope(f.capture);
      const team = await getTeamBySlug(db, f.team!);
      let deploymentId: string | undefined;
      if (f.deployment) {
        const [dep] = await db
          .select({ id: deployments.id })
          .from(deployments)
          .where(and(eq(deployments.teamId, team.id), eq(deployments.name, f.deployment)));
        if (!dep) throw new UsageError(`team ${team.slug} has no deployment named '${f.deployment}'`);
        deploymentId = dep.id;
      }
      const { key, secret } = await createApiKey(db, {
        teamId: team.id,
        kind: f.kind,
        name: f.name,
        deploymentId,
        capturePipelines,
      });
      console.log(`created ${key.kind} key ${key.id} for team ${team.slug}; the secret is shown once:`);
      console.log(secret);
    },
  },
  "key:list": {
    usage: "key:list --team S",
    flags: { team: { type: "string", required: true } },
    run: async ({ db }, f) => {
      const team = await getTeamBySlug(db, f.team!);
      const keys = await listApiKeys(db, team.id);
      if (keys.length === 0) return console.log(`team ${team.slug} has no keys`);
      const rows = keys.map((k) => ({
        id: k.id,
        kind: k.kind,
        name: k.name ?? "",
        prefix: `${k.prefix}…`,
        deployment: k.deploymentName ?? "",
        capture: k.kind === "api" ? "" : captureLabel(k.capturePipelines),
        created: k.createdAt.toISOString(),
        last_used: k.lastUsedAt?.toISOString() ?? "never",
        status: k.revokedAt ? "revoked" : "active",
      }));
      printTable(rows);
    },
  },
  "deployment:create": {
    usage: [
      `deployment:create --team S --name N --model PATH_OR_ID [--dtype ${DTYPE_CHOICES.join("|")}]   # prints the URL`,
      `deployment:create --team S --name N --upstream URL[,URL…] --upstream-model NAME [--upstream-kind ${UPSTREAM_KINDS.join("|")}] [--upstream-key-env VAR]`,
    ].join("\n  "),
    flags: {
      team: { type: "string", required: true },
      name: { type: "string", required: true },
      model: { type: "string" },
      dtype: { type: "string" },
      upstream: { type: "string" },
      "upstream-model": { type: "string" },
      "upstream-kind": { type: "string" },
      "upstream-key-env": { type: "string" },
    },
    before: (f) => {
      // The key is sealed under AUTH_SECRET: without it (and without the app's DATA_DIR/auth-secret)
      // the CLI would make a secret of its own, which the app does not have, and every request of
      // the deployment then failed with a 500 that said nothing of it.
      const secretFile = path.join(env().DATA_DIR, "auth-secret");
      if (f["upstream-key-env"] !== undefined && !process.env.AUTH_SECRET?.trim() && !existsSync(secretFile))
        throw new UsageError(
          `AUTH_SECRET is not set and ${secretFile} does not exist: the key would be sealed under a secret ` +
            "the app does not have. Run this with the app's AUTH_SECRET (or its DATA_DIR).",
        );
    },
    run: async ({ db }, f) => {
      const team = await getTeamBySlug(db, f.team!);
      if (f.upstream !== undefined) {
        if (f.model !== undefined || f.dtype !== undefined)
          throw new UsageError("--model and --dtype are for local deployments; an upstream one takes --upstream-model");
        if (!f["upstream-model"])
          throw new UsageError("--upstream needs --upstream-model (the model name the upstream serves)");
        const kind = f["upstream-kind"] ?? "openai";
        if (!(UPSTREAM_KINDS as readonly string[]).includes(kind))
          throw new UsageError(`--upstream-kind must be one of ${UPSTREAM_KINDS.join(", ")}`);
        let key: string | undefined;
        const keyEnv = f["upstream-key-env"];
        if (keyEnv !== undefined) {
          key = process.env[keyEnv];
          if (!key) throw new UsageError(`--upstream-key-env: the environment variable ${keyEnv} is not set or empty`);
        }
        const urls = f.upstream
          .split(",")
          .map((u) => u.trim())
          .filter(Boolean);
        const dep = await createDeployment(db, {
          teamId: team.id,
          name: f.name!,
          upstream: { kind: kind as UpstreamKind, urls, model: f["upstream-model"], key },
        });
        // The key is never printed: only whether there is one.
        console.log(
          `created deployment ${dep.name} (${dep.id}) served by ${kind} upstream${urls.length > 1 ? "s" : ""} ` +
            `${dep.upstreamUrls!.map(shownUrl).join(", ")} as ${dep.upstreamModel}${key ? " (with its key, stored encrypted)" : ""}`,
        );
        console.log(deploymentUrl(team.slug, dep.name));
        return;
      }
      if (f["upstream-model"] || f["upstream-kind"] || f["upstream-key-env"])
        throw new UsageError("--upstream-model, --upstream-kind and --upstream-key-env need --upstream");
      if (!f.model) throw new UsageError("--model is required (or --upstream for an upstream deployment)");
      const model = modelReference(f.model);
      const dtype = f.dtype ?? "auto";
      if (!(DTYPE_CHOICES as readonly string[]).includes(dtype))
        throw new UsageError(`--dtype ${dtypeChoiceError(dtype)}`);
      await checkDtype(model, dtype);
      const dep = await createDeployment(db, { teamId: team.id, name: f.name!, model, dtype });
      console.log(`created deployment ${dep.name} (${dep.id}) serving ${dep.model} (${dep.dtype})`);
      console.log("the workers load it now; deployment:list shows its state");
      console.log(deploymentUrl(team.slug, dep.name));
    },
  },
  "deployment:list": {
    usage: "deployment:list --team S",
    flags: { team: { type: "string", required: true } },
    run: async ({ db }, f) => {
      const team = await getTeamBySlug(db, f.team!);
      const rows = await listDeploymentDtos(db, team);
      if (rows.length === 0) return console.log(`team ${team.slug} has no deployments`);
      printTable(
        rows.map((d) => ({
          name: d.name,
          model: d.upstream ? `${d.upstream.kind}: ${d.upstream.model} @ ${d.upstream.urls.join(",")}` : d.model,
          dtype: d.status.dtype && d.dtype === "auto" ? `auto (${d.status.dtype})` : d.dtype,
          state: d.status.progress ? `${d.status.state} ${d.status.progress.percent}%` : d.status.state,
          url: d.url,
          note: d.status.message ?? "",
        })),
      );
    },
  },
  "deployment:delete": {
    usage: "deployment:delete --team S --name N",
    flags: { team: { type: "string", required: true }, name: { type: "string", required: true } },
    run: async ({ db }, f) => {
      const team = await getTeamBySlug(db, f.team!);
      const dep = await deleteDeployment(db, { teamId: team.id, name: f.name! });
      console.log(`deleted deployment ${dep.name} (${dep.id}) of team ${team.slug}`);
    },
  },
  "team:limits": {
    usage:
      "team:limits --team S [--requests-per-minute N] [--tokens-per-minute N] [--concurrent-streams N] [--dataset-jobs N] [--import-jobs N] [--model-deployments N] [--reset]   # 'default' resets one",
    flags: {
      team: { type: "string", required: true },
      "requests-per-minute": { type: "string" },
      "tokens-per-minute": { type: "string" },
      "concurrent-streams": { type: "string" },
      "dataset-jobs": { type: "string" },
      "import-jobs": { type: "string" },
      "model-deployments": { type: "string" },
      reset: { type: "boolean" },
    },
    run: async ({ db }, f) => {
      const team = await getTeamBySlug(db, f.team!);
      const value = (flag: string): number | null | undefined => {
        const v = f[flag];
        if (v === undefined) return undefined;
        if (v === "default") return null;
        if (!/^\d+$/.test(v)) throw new UsageError(`--${flag} must be a positive integer or 'default'`);
        return Number(v);
      };
      const updated = await setTeamLimits(db, {
        teamId: team.id,
        reset: Boolean(f.reset),
        limits: {
          requestsPerMinute: value("requests-per-minute"),
          tokensPerMinute: value("tokens-per-minute"),
          concurrentStreams: value("concurrent-streams"),
          datasetJobs: value("dataset-jobs"),
          importJobs: value("import-jobs"),
          modelDeployments: value("model-deployments"),
        },
      });
      const effective = teamLimits(updated);
      printTable(
        LIMIT_FIELDS.map((k) => ({
          limit: k,
          value: String(effective[k]),
          source: updated.limits?.[k] !== undefined ? "team" : "default",
        })),
      );
    },
  },
  "key:revoke": {
    usage: "key:revoke --id ID",
    flags: { id: { type: "string", required: true } },
    run: async ({ db }, f) => {
      const key = await revokeApiKey(db, { id: f.id! });
      console.log(`revoked ${key.kind} key ${key.id}`);
    },
  },
};

/**
 * Refuses a dtype the model lacks, naming the files it has. A hub that cannot be reached is no
 * reason to refuse: the workers then report the problem as the deployment's state.
 */
async function checkDtype(model: string, dtype: string): Promise<void> {
  const { modelDtypes } = await import("@/workers/engine");
  let offered: Awaited<ReturnType<typeof modelDtypes>>;
  try {
    offered = await modelDtypes(model);
  } catch (err) {
    const reason = (err as { reason?: string }).reason;
    if (reason === "not_found" || reason === "unauthorized" || reason === "forbidden" || reason === "invalid_model")
      throw new UsageError((err as Error).message);
    console.warn(`warning: could not check ${model}'s files (${(err as Error).message}); deploying anyway`);
    return;
  }
  if (offered.dtypes.length === 0)
    throw new UsageError(
      offered.unsupported.length
        ? `${model} has no ONNX model file this engine can run; it has: ${offered.unsupported.join(", ")}`
        : `${model} has no ONNX model files (onnx/model*.onnx)`,
    );
  if (dtype !== "auto" && !(offered.dtypes as string[]).includes(dtype))
    throw new UsageError(`${model} has no ${dtype} weights; it has: ${offered.dtypes.join(", ")}`);
}

/**
 * A model folder given as a relative path is made absolute against the directory the command was
 * typed in (npm runs scripts from the package root and keeps the caller's in INIT_CWD), so every
 * worker finds it; anything that is not an existing path is a hub id and stays as given.
 */
/** `--capture`: absent or "any" (null: any pipeline of the team), "none" ([]), or ids, comma-separated. */
function captureScope(value: string | undefined): string[] | null {
  if (value === undefined || value === "any") return null;
  if (value === "none") return [];
  const ids = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (ids.length === 0) throw new UsageError("--capture takes 'any', 'none' or pipeline ids separated by commas");
  return ids;
}

/** A model key's capture scope, as key:list prints it. */
const captureLabel = (ids: string[] | null) => (ids === null ? "any" : ids.length === 0 ? "none" : ids.join(","));

function modelReference(model: string): string {
  const local = path.resolve(process.env.INIT_CWD ?? process.cwd(), model);
  return path.isAbsolute(model) || model.startsWith(".") || existsSync(local) ? local : model;
}

function roleOf(role: string): "owner" | "member" {
  if (role !== "owner" && role !== "member") throw new UsageError("--role must be 'owner' or 'member'");
  return role;
}

/** --password, or the first line of stdin with --password-stdin (out of `ps` and the shell's history). */
function passwordOf(f: Record<string, string | undefined>): string {
  if (f.password !== undefined && f["password-stdin"])
    throw new UsageError("give --password or --password-stdin, not both");
  if (f.password !== undefined) return f.password;
  if (!f["password-stdin"]) throw new UsageError("--password or --password-stdin is required");
  if (process.stdin.isTTY) process.stderr.write("password (then Enter and Ctrl-D): ");
  const password = readFileSync(0, "utf8").split(/\r?\n/)[0]!;
  if (!password) throw new UsageError("no password on stdin");
  return password;
}

function printTable(rows: Record<string, string>[]): void {
  const cols = Object.keys(rows[0]!);
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(width[i]!))
      .join("  ")
      .trimEnd();
  console.log(line(cols));
  for (const r of rows) console.log(line(cols.map((c) => r[c]!)));
}

function usage(): string {
  return [
    "usage: npm run cli -- <command> [flags]",
    "",
    "commands:",
    ...Object.values(commands).map((c) => `  ${c.usage}`),
  ].join("\n");
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === "help" || name === "--help") {
    console.log(usage());
    return 0;
  }
  if (!name) throw new UsageError(`no command given\n\n${usage()}`);
  const command = commands[name];
  if (!command) throw new UsageError(`unknown command '${name}'\n\n${usage()}`);
  let values: Record<string, string | undefined>;
  try {
    values = parseArgs({ args: rest, options: command.flags, strict: true, allowPositionals: false }).values as Record<
      string,
      string | undefined
    >;
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\nusage: npm run cli -- ${command.usage}`);
  }
  for (const [flag, spec] of Object.entries(command.flags)) {
    if (spec.required && !values[flag])
      throw new UsageError(`--${flag} is required\nusage: npm run cli -- ${command.usage}`);
  }
  command.before?.(values);
  await withAppDatabase((h) => command.run(h, values));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof UsageError) {
      console.error(`error: ${err.message}`);
      process.exit(2);
    }
    if (err instanceof ApiError || err instanceof EnvError) {
      console.error(`error: ${err.message}`);
      process.exit(err instanceof ApiError && err.type === "invalid_request" ? 2 : 1);
    }
    console.error("error:", err);
    process.exit(1);
  },
);
