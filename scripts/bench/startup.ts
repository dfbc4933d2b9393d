// `npm run bench -- startup [--rounds N]`: how long a new user waits. Each round runs `npm start`
// on a fresh DATA_DIR (embedded PostgreSQL, initdb included; the production build already made)
// and times, from the spawn of `npm start`:
//   first_answer_s  the first 200 from /v1/pipelines/list with the demo API key (read from
//                   DATA_DIR/first-run.txt as soon as it is written; polled every 10 ms);
//   banner_s        the banner ("Stop: Ctrl-C"): the app, the worker and its model ready;
//   restart_s       the same first answer for a second `npm start` on the same, kept data.
// Goal: first_answer_s ≤ 3 (median of the rounds).
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { freePort } from "@/lib/net/free-port";
import { ensureBuild, repoRoot } from "../lib/build";
import { percentile, round } from "./_harness";

type Timing = { firstAnswer: number; banner: number };

async function timeStart(dataDir: string): Promise<Timing> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: String(port) };
  delete env.DATABASE_URL;
  delete env.PUBLIC_URL;
  const started = performance.now();
  // Its own process group, so that the SIGINT below reaches npm and everything under it, as a
  // terminal's Ctrl-C does.
  const child = spawn("npm", ["start", "--silent"], { cwd: repoRoot, env, detached: true, stdio: "pipe" });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  try {
    const keyFile = path.join(dataDir, "first-run.txt");
    let key: string | undefined;
    let firstAnswer = 0;
    let banner = 0;
    const deadline = started + 60_000;
    while (!firstAnswer || !banner) {
      if (child.exitCode !== null) throw new Error(`npm start exited:\n${out}`);
      if (performance.now() > deadline) throw new Error(`npm start did not come up in 60 s:\n${out}`);
      if (!banner && out.includes("Stop:")) banner = performance.now() - started;
      if (!key && existsSync(keyFile)) key = /API key:\s+(\S+)/.exec(readFileSync(keyFile, "utf8"))?.[1];
      if (key && !firstAnswer) {
        const ok = await fetch(`http://127.0.0.1:${port}/v1/pipelines/list`, {
          headers: { authorization: `Bearer ${key}` },
        }).then(
          (r) => r.status === 200,
          () => false,
        );
        if (ok) firstAnswer = performance.now() - started;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    return { firstAnswer: firstAnswer / 1000, banner: banner / 1000 };
  } finally {
    await stop(child);
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  process.kill(-child.pid!, "SIGINT");
  await exited;
}

export default async function startup(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { rounds: { type: "string", default: "3" } } });
  ensureBuild();
  const first: Timing[] = [];
  const restart: Timing[] = [];
  for (let i = 0; i < Number(values.rounds); i++) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "lmp-bench-startup-"));
    chmodSync(dataDir, 0o755); // as root, the embedded PostgreSQL's user must reach it
    try {
      const fresh = await timeStart(dataDir);
      const again = await timeStart(dataDir);
      first.push(fresh);
      restart.push(again);
      console.log(
        `round ${i + 1}: fresh DATA_DIR first answer ${fresh.firstAnswer.toFixed(2)} s, banner ${fresh.banner.toFixed(2)} s; ` +
          `restart first answer ${again.firstAnswer.toFixed(2)} s, banner ${again.banner.toFixed(2)} s`,
      );
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  const median = (xs: number[]) => round(percentile(xs, 50), 2);
  console.log(
    JSON.stringify({
      bench: "startup",
      first_answer_s: median(first.map((t) => t.firstAnswer)),
      banner_s: median(first.map((t) => t.banner)),
      restart_first_answer_s: median(restart.map((t) => t.firstAnswer)),
      restart_banner_s: median(restart.map((t) => t.banner)),
      rounds: first.length,
    }),
  );
}
