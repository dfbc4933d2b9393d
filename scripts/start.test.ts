import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "..");
const dataDir = mkdtempSync(path.join(os.tmpdir(), "lmp-start-"));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

type Launch = { child: ChildProcess; output: () => string };

/** `npm start` as a user runs it (embedded database, files in dataDir); resolves once it prints "Stop:". */
async function launch(port: number): Promise<Launch> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: String(port) };
  delete env.DATABASE_URL;
  delete env.PUBLIC_URL;
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "scripts/start.ts")], { cwd: root, env });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 90_000;
  while (!out.includes("Stop:")) {
    if (child.exitCode !== null) throw new Error(`npm start exited early:\n${out}`);
    if (Date.now() > deadline) throw new Error(`npm start did not come up:\n${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return { child, output: () => out };
}

async function stop(l: Launch): Promise<number | null> {
  l.child.kill("SIGINT");
  return new Promise((resolve) => l.child.once("exit", (code) => resolve(code)));
}

const dbUrl = () => (JSON.parse(readFileSync(path.join(dataDir, "embedded-db.json"), "utf8")) as { url: string }).url;

describe("npm start", () => {
  it("seeds a demo team on first run, serves the API and a worker, stops on Ctrl-C, and keeps data", async () => {
    const port = await freePort();
    const base = `http://localhost:${port}`;
    const first = await launch(port);
    const out = first.output();
    expect(out).toContain(`Open:       ${base}`);
    const signIn = /Sign in:\s+(demo@example\.com) \/ (\S+)/.exec(out);
    expect(signIn).not.toBeNull();
    const apiKey = /API key:\s+(lmp_sk_\S+)/.exec(out)![1]!;
    const modelKey = /Model key:\s+(lmp_mk_\S+)/.exec(out)![1]!;

    // The demo deployment serves the generated tiny model: its printed URL completes a prompt.
    const deploymentUrl = /Deployment:\s+(\S+)/.exec(out)![1]!;
    expect(deploymentUrl).toBe(`${base}/deployments/demo/demo`);
    const completion = await fetch(deploymentUrl, {
      method: "POST",
      headers: { authorization: `Bearer ${modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 5 }),
    });
    expect(completion.status).toBe(200);
    const completed = (await completion.json()) as { result: { completion: string }[] };
    expect(completed.result[0]!.completion.length).toBeGreaterThan(0);

    const auth = { authorization: `Bearer ${apiKey}` };
    const created = await fetch(`${base}/v1/pipelines/create`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ name: "kept" }),
    });
    expect(created.status).toBe(200);
    const pipelineId = ((await created.json()) as { id: string }).id;

    // The worker registered itself with a heartbeat.
    const sql = postgres(dbUrl(), { max: 1 });
    await expect
      .poll(
        async () =>
          (await sql`select count(*)::int as n from workers where heartbeat_at > now() - interval '30 seconds'`)[0]!.n,
        { timeout: 20_000 },
      )
      .toBe(1);
    await sql.end();

    // The CLI works against the running app's database.
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir };
    delete env.DATABASE_URL;
    const list = spawnSync(
      process.execPath,
      ["--import", "tsx", path.join(root, "scripts/cli.ts"), "key:list", "--team", "demo"],
      { cwd: root, env, encoding: "utf8" },
    );
    expect(list.status, list.stderr).toBe(0);
    expect(list.stdout.trim().split("\n")).toHaveLength(3);

    expect(await stop(first)).toBe(0);
    await expect(fetch(`${base}/api/health`)).rejects.toThrow();

    const second = await launch(port);
    expect(second.output()).not.toMatch(/API key:\s+lmp_sk_/);
    expect(second.output()).toContain("first-run.txt");
    // The demo deployment and its model are kept.
    const again = await fetch(deploymentUrl, {
      method: "POST",
      headers: { authorization: `Bearer ${modelKey}`, "content-type": "application/json" },
      body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 5 }),
    });
    expect(again.status).toBe(200);
    const got = await fetch(`${base}/v1/pipelines/${pipelineId}`, { headers: auth });
    expect(got.status).toBe(200);
    const sql2 = postgres(dbUrl(), { max: 1 });
    expect((await sql2`select count(*)::int as n from workers`)[0]!.n).toBe(1); // the first run's worker deregistered
    await sql2.end();
    expect(await stop(second)).toBe(0);
  }, 240_000);

  it("refuses to start on a wrong setting, naming the variable", () => {
    const env = { ...process.env, DATA_DIR: dataDir, PORT: "not-a-port" };
    const r = spawnSync(process.execPath, ["--import", "tsx", path.join(root, "scripts/start.ts")], {
      cwd: root,
      env,
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/Invalid configuration:\n\s+PORT:/);
  });
});
