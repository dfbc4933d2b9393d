// deployment:create / list / delete through the CLI, against the suite's database; the URL it
// prints answers completions.
import { describe, expect, inject, it } from "vitest";
import { runCli } from "../helpers/cli";
import { baseUrl, makeTeam } from "../helpers/context";

const cli = (...args: string[]) => runCli({}, ...args);

describe("deployment CLI", () => {
  it("creates a deployment and prints its URL, which answers with the team's model key", async () => {
    const team = await makeTeam();
    const created = await cli(
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

    const list = await cli("deployment:list", "--team", team.slug);
    expect(list.code).toBe(0);
    const rows = list.stdout.trim().split("\n");
    expect(rows).toHaveLength(2);
    expect(rows[1]).toContain("cli.bot_1");
    expect(rows[1]).toContain(inject("tinyModel"));
    expect(rows[1]).toContain(created.lastLine);

    const deleted = await cli("deployment:delete", "--team", team.slug, "--name", "cli.bot_1");
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await cli("deployment:list", "--team", team.slug)).stdout).toContain("has no deployments");
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
    expect((await cli("deployment:create", "--team", team.slug, "--name", "dup", "--model", model)).code).toBe(0);
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
      // transformers.js' q1 files hold 1-bit weights, which onnxruntime cannot run: refused with why.
      [
        ["deployment:create", "--team", team.slug, "--name", "d", "--model", model, "--dtype", "q1"],
        /--dtype q1 is not supported: 1-bit MatMulNBits weights, which onnxruntime's CPU kernels do not run \(they take 2, 4 and 8 bits\); must be one of .*q2, q2f16/,
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
      const r = await cli(...args);
      expect(r.code, args.join(" ")).toBe(code);
      expect(r.stderr, args.join(" ")).toMatch(message);
    }
  });
});
