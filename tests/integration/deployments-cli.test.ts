// deployment:create / list / delete through the CLI, against the suite's database; the URL it
// prints answers completions.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, inject, it } from "vitest";
import { baseUrl, makeTeam } from "../helpers/context";

const root = path.resolve(import.meta.dirname, "../..");

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, ["--import", "tsx", path.join(root, "scripts/cli.ts"), ...args], {
    cwd: root,
    env: {
      ...process.env,
      DATABASE_URL: inject("databaseUrl"),
      AUTH_SECRET: inject("authSecret"),
      DATA_DIR: inject("dataDir"),
      PUBLIC_URL: baseUrl,
    },
    encoding: "utf8",
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, lastLine: r.stdout.trim().split("\n").at(-1) ?? "" };
}

describe("deployment CLI", () => {
  it("creates a deployment and prints its URL, which answers with the team's model key", async () => {
    const team = await makeTeam();
    const created = cli(
      "deployment:create",
      "--team",
      team.slug,
      "--name",
      "cli.bot_1",
      "--model",
      inject("tinyModel"),
    );
    expect(created.code, created.stderr).toBe(0);
    expect(created.lastLine).toBe(`${baseUrl}/deployments/${team.slug}/cli.bot_1`);
    const res = await fetch(created.lastLine, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Hello", max_tokens: 3 }),
    });
    expect(res.status).toBe(200);

    const list = cli("deployment:list", "--team", team.slug);
    expect(list.code).toBe(0);
    const rows = list.stdout.trim().split("\n");
    expect(rows).toHaveLength(2);
    expect(rows[1]).toContain("cli.bot_1");
    expect(rows[1]).toContain(inject("tinyModel"));
    expect(rows[1]).toContain(created.lastLine);

    const deleted = cli("deployment:delete", "--team", team.slug, "--name", "cli.bot_1");
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(cli("deployment:list", "--team", team.slug).stdout).toContain("has no deployments");
    const gone = await fetch(created.lastLine, {
      method: "POST",
      headers: { authorization: `Bearer ${team.modelKey}` },
      body: JSON.stringify({ prompt: "Hello" }),
    });
    expect(gone.status).toBe(404);
  });

  it("fails with a clear message on a duplicate, a bad name, an unknown team or deployment", async () => {
    const team = await makeTeam();
    const model = inject("tinyModel");
    expect(cli("deployment:create", "--team", team.slug, "--name", "dup", "--model", model).code).toBe(0);
    const cases: [string[], RegExp, number][] = [
      [["deployment:create", "--team", team.slug, "--name", "dup", "--model", model], /already exists/, 1],
      [["deployment:create", "--team", team.slug, "--name", "Bad Name", "--model", model], /name/, 2],
      [["deployment:create", "--team", team.slug, "--name", "..", "--model", model], /name/, 2],
      [["deployment:create", "--team", team.slug, "--name", "x".repeat(65), "--model", model], /name/, 2],
      [["deployment:create", "--team", team.slug, "--name", "ok"], /--model is required/, 2],
      [["deployment:create", "--team", "no-such-team", "--name", "x", "--model", model], /No team/, 1],
      [["deployment:delete", "--team", team.slug, "--name", "missing"], /No deployment named 'missing'/, 1],
      [
        ["deployment:create", "--team", team.slug, "--name", "d", "--model", model, "--dtype", "q5"],
        /--dtype must be/,
        2,
      ],
      // The generated tiny model ships fp32 only: a dtype it lacks is refused, naming what it has.
      [
        ["deployment:create", "--team", team.slug, "--name", "d", "--model", model, "--dtype", "q4"],
        /no q4 weights; it has: fp32/,
        2,
      ],
      [["deployment:create", "--team", team.slug, "--name", "d", "--model", "/no/such/folder"], /not found/, 2],
    ];
    for (const [args, message, code] of cases) {
      const r = cli(...args);
      expect(r.code, args.join(" ")).toBe(code);
      expect(r.stderr, args.join(" ")).toMatch(message);
    }
  });
});
