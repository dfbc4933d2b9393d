import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "..");
const dataDir = mkdtempSync(path.join(os.tmpdir(), "lmp-cli-"));
// As root, the embedded PostgreSQL runs as another user, which must reach DATA_DIR (mkdtemp makes it 0700).
chmodSync(dataDir, 0o755);
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** Runs the CLI as a user would, on the embedded database in a fresh DATA_DIR (no app running). */
function cli(...args: string[]) {
  return cliWithInput("", ...args);
}

function cliWithInput(input: string, ...args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir };
  delete env.DATABASE_URL;
  const r = spawnSync(process.execPath, ["--import", "tsx", path.join(root, "scripts/cli.ts"), ...args], {
    cwd: root,
    env,
    encoding: "utf8",
    input,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, lastLine: r.stdout.trim().split("\n").at(-1) ?? "" };
}

/** The same, without waiting: for commands run side by side. */
function cliAsync(...args: string[]): Promise<{ code: number | null; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir };
  delete env.DATABASE_URL;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "scripts/cli.ts"), ...args], {
      cwd: root,
      env,
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("exit", (code) => resolve({ code, stderr }));
  });
}

describe("cli", () => {
  it("creates teams, users and keys, lists and revokes keys, on the embedded database", () => {
    expect(cli("team:create", "--slug", "acme", "--name", "Acme").code).toBe(0);
    const user = cli("user:create", "--email", "Ann@Example.com", "--password", "correct horse", "--team", "acme");
    expect(user.code, user.stderr).toBe(0);
    expect(user.stdout).toContain("ann@example.com");

    const api = cli("key:create", "--team", "acme", "--kind", "api", "--name", "ci");
    expect(api.code, api.stderr).toBe(0);
    expect(api.lastLine).toMatch(/^lmp_sk_[A-Za-z0-9_-]{43}$/);
    const model = cli("key:create", "--team", "acme", "--kind", "model");
    expect(model.lastLine).toMatch(/^lmp_mk_[A-Za-z0-9_-]{43}$/);
    const completionsOnly = cli("key:create", "--team", "acme", "--kind", "model", "--capture", "none");
    expect(completionsOnly.code, completionsOnly.stderr).toBe(0);

    const list = cli("key:list", "--team", "acme");
    expect(list.code).toBe(0);
    const rows = list.stdout.trim().split("\n").slice(1);
    expect(rows).toHaveLength(3);
    const idOf = (r: { stdout: string }) => /key_[a-z0-9]{20}/.exec(r.stdout)![0];
    expect(rows.find((l) => l.startsWith(idOf(completionsOnly)))).toMatch(/\bnone\b/);
    expect(rows.find((l) => l.startsWith(idOf(model)))).toMatch(/\bany\b/);
    expect(list.stdout).toContain(api.lastLine.slice(0, 11));
    expect(list.stdout).not.toContain(api.lastLine); // never the whole secret

    const keyId = /key_[a-z0-9]{20}/.exec(api.stdout)![0];
    const revoke = cli("key:revoke", "--id", keyId);
    expect(revoke.code).toBe(0);
    const after = cli("key:list", "--team", "acme");
    expect(after.stdout.split("\n").find((l) => l.startsWith(keyId))).toMatch(/revoked$/);
  });

  it("makes a CLI team's first user its owner, changes roles and sets a password from stdin", () => {
    expect(cli("team:create", "--slug", "gamma").code).toBe(0);
    const first = cli("user:create", "--email", "owner@gamma.test", "--password", "long enough", "--team", "gamma");
    expect(first.stdout).toMatch(/as owner$/m); // before: a member, and the team had no owner at all
    const second = cliWithInput(
      "from stdin\n",
      "user:create",
      "--email",
      "m@gamma.test",
      "--password-stdin",
      "--team",
      "gamma",
    );
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/as member$/m);
    const promoted = cli("member:role", "--team", "gamma", "--email", "M@gamma.test", "--role", "owner");
    expect(promoted.code, promoted.stderr).toBe(0);
    expect(promoted.stdout).toMatch(/m@gamma.test is now owner of team gamma/);
    // Both owners: one may step down; the last owner may not.
    expect(cli("member:role", "--team", "gamma", "--email", "owner@gamma.test", "--role", "member").code).toBe(0);
    const last = cli("member:role", "--team", "gamma", "--email", "m@gamma.test", "--role", "member");
    expect(last.code).not.toBe(0);
    expect(last.stderr).toMatch(/owner/);
    const reset = cliWithInput(
      "a new password\n",
      "user:set-password",
      "--email",
      "owner@gamma.test",
      "--password-stdin",
    );
    expect(reset.code, reset.stderr).toBe(0);
    expect(reset.stdout).toMatch(/set the password of owner@gamma.test/);
    for (const [args, message] of [
      [["user:set-password", "--email", "nobody@gamma.test", "--password", "long enough"], /No user with email/],
      [["user:set-password", "--email", "owner@gamma.test"], /--password or --password-stdin is required/],
      [["user:set-password", "--email", "owner@gamma.test", "--password", "short"], /password/],
      [["member:role", "--team", "gamma", "--email", "m@gamma.test", "--role", "admin"], /'owner' or 'member'/],
    ] as const) {
      const r = cli(...args);
      expect(r.code, args.join(" ")).not.toBe(0);
      expect(r.stderr, args.join(" ")).toMatch(message);
    }
  });

  it("fails with a clear message and a non-zero exit on bad input", () => {
    expect(cli("team:create", "--slug", "beta").code).toBe(0);
    const cases: [string[], RegExp][] = [
      [[], /usage/],
      [["nope"], /unknown command 'nope'/],
      [["team:create"], /--slug is required/],
      [["team:create", "--slug", "Bad Slug"], /slug/],
      [["team:create", "--slug", "beta2", "--bogus", "x"], /Unknown option '--bogus'/],
      [["key:create", "--team", "missing", "--kind", "api"], /No team with slug 'missing'/],
      [["key:create", "--team", "beta", "--kind", "admin"], /--kind must be 'api' or 'model'/],
      [["key:create", "--team", "beta", "--kind", "api", "--deployment", "d"], /model keys only/],
      [["key:create", "--team", "beta", "--kind", "model", "--deployment", "d"], /no deployment named 'd'/],
      [["key:create", "--team", "beta", "--kind", "api", "--capture", "none"], /--capture applies to model keys only/],
      [["key:create", "--team", "beta", "--kind", "model", "--capture", "pipe_x"], /No pipeline with id 'pipe_x'/],
      [["key:create", "--team", "beta", "--kind", "model", "--capture", ","], /--capture takes/],
      [["user:create", "--email", "not-an-email", "--password", "long enough", "--team", "beta"], /email/],
      [["key:revoke", "--id", "key_doesnotexist"], /No key with id/],
    ];
    for (const [args, message] of cases) {
      const r = cli(...args);
      expect(r.code, args.join(" ")).not.toBe(0);
      expect(r.stderr, args.join(" ")).toMatch(message);
    }
  });

  it("will not seal an upstream key without the app's secret (AUTH_SECRET, or DATA_DIR/auth-secret)", () => {
    const elsewhere = mkdtempSync(path.join(os.tmpdir(), "lmp-cli-nosecret-"));
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: elsewhere, THE_KEY: "sk-upstream" };
    delete env.DATABASE_URL;
    delete env.AUTH_SECRET;
    const args = ["deployment:create", "--team", "acme", "--name", "up", "--upstream", "http://10.0.0.9:8000"];
    const r = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        path.join(root, "scripts/cli.ts"),
        ...args,
        "--upstream-model",
        "m",
        "--upstream-key-env",
        "THE_KEY",
      ],
      { cwd: root, env, encoding: "utf8" },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/AUTH_SECRET is not set and .*auth-secret does not exist/);
    expect(readdirSync(elsewhere)).toEqual([]); // before: a new auth-secret, which the app did not have
    rmSync(elsewhere, { recursive: true, force: true });
  });

  it("runs commands side by side on the embedded database: the second waits for the first's server", async () => {
    // Before, the second shut the first one's server down under it ("terminating connection").
    const [a, b] = await Promise.all([
      cliAsync("team:create", "--slug", "side-a"),
      cliAsync("team:create", "--slug", "side-b"),
    ]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    const list = cli("key:list", "--team", "side-b");
    expect(list.code, list.stderr).toBe(0);
  }, 120_000);
});
