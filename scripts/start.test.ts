import { spawn, spawnSync } from "node:child_process";
import net from "node:net";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "@/lib/net/free-port";
import { embeddedUrl, freshDataDir, launch as launchOn, repoRoot } from "./testing/launch";

const dataDir = freshDataDir("start");
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
const launch = (port: number) => launchOn(dataDir, port);
const dbUrl = () => embeddedUrl(dataDir);
const root = repoRoot;

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
    // The worker was given the secret of its internal API, not AUTH_SECRET (which signs sessions).
    const [{ pid: workerPid }] = (await sql`select pid from workers`) as unknown as [{ pid: number }];
    const workerEnv = readFileSync(`/proc/${workerPid}/environ`, "utf8").split("\0");
    expect(workerEnv.some((v) => v.startsWith("WORKER_SECRET="))).toBe(true);
    expect(workerEnv.some((v) => v.startsWith("AUTH_SECRET="))).toBe(false);
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

    // The embedded PostgreSQL: its port and password file are printed; it wants the password.
    const dbPort = Number(/embedded PostgreSQL on 127\.0\.0\.1:(\d+)/.exec(out)![1]);
    expect(out).toContain(path.join(dataDir, "db-password"));
    expect(new URL(dbUrl()).port).toBe(String(dbPort));
    const noPassword = postgres(`postgres://postgres@127.0.0.1:${dbPort}/postgres`, { max: 1 });
    await expect(noPassword`select 1`).rejects.toThrow();
    await noPassword.end();
    const serverPid = (
      JSON.parse(readFileSync(path.join(dataDir, "embedded-db.json"), "utf8")) as { serverPid: number }
    ).serverPid;

    // A closed terminal (SIGHUP) stops it all as Ctrl-C does (before: the launcher died at once,
    // and the database, in its own process group, ran on).
    const hungUp = new Promise<number | null>((resolve) => first.child.once("exit", (code) => resolve(code)));
    first.child.kill("SIGHUP");
    expect(await hungUp).toBe(0);
    await expect(fetch(`${base}/api/health`)).rejects.toThrow();
    // The database stopped too, cleanly (no pid file left).
    expect(() => process.kill(serverPid, 0)).toThrow();
    expect(existsSync(path.join(dataDir, "pg", "postmaster.pid"))).toBe(false);

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
    // The database dies under it (the OOM killer): the launcher says so and stops, exit 1 (before:
    // not a word, and the app answered 503 for good).
    const exited = new Promise<number | null>((resolve) => second.child.once("exit", (code) => resolve(code)));
    const { serverPid: secondServer } = JSON.parse(readFileSync(path.join(dataDir, "embedded-db.json"), "utf8")) as {
      serverPid: number;
    };
    process.kill(secondServer, "SIGKILL");
    expect(await exited).toBe(1);
    expect(second.output()).toMatch(/the embedded PostgreSQL exited \(SIGKILL\); its log is .*pg\.log/);
  }, 240_000);

  it("refuses to start on a port in use, saying so", async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, () => r()));
    const port = (taken.address() as net.AddressInfo).port;
    // No build in this folder yet: the taken port is said before any build starts (a build
    // replaces the running instance's files).
    const distDir = mkdtempSync(path.join(os.tmpdir(), "lmp-dist-"));
    const env = { ...process.env, DATA_DIR: dataDir, PORT: String(port), NEXT_DIST_DIR: distDir };
    const r = await new Promise<{ status: number | null; stderr: string; stdout: string }>((resolve) => {
      const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "scripts/start.ts")], {
        cwd: root,
        env,
      });
      let stderr = "";
      let stdout = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.on("exit", (status) => resolve({ status, stderr, stdout }));
    });
    taken.close();
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`Port ${port} is in use`);
    expect(r.stdout).not.toContain("Building the web app");
    expect(readdirSync(distDir)).toEqual([]);
  }, 120_000);

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
    // Said once, with no stack trace of the same error after it.
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
