import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { embeddedInfoFile } from "@/lib/db/url";
import { embeddedPaths, startAppEmbeddedDb } from "./database";
import { migrationsUpTo } from "./legacy-pglite";

const dirs: string[] = [];
/** A DATA_DIR the server's user can reach (as root it runs as another user; mkdtemp makes 0700). */
function dataDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lmp-db-"));
  chmodSync(dir, 0o755);
  dirs.push(dir);
  return dir;
}
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

async function query<T>(url: string, fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    return await fn(sql);
  } finally {
    await sql.end({ timeout: 1 });
  }
}

const pidAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("embedded PostgreSQL", () => {
  it("is real PostgreSQL 18 on loopback, with a generated password that it requires", async () => {
    const dir = dataDir();
    const db = await startAppEmbeddedDb(dir, { announce: true });
    try {
      const p = embeddedPaths(dir);
      const password = readFileSync(p.passwordFile, "utf8").trim();
      expect(password.length).toBeGreaterThanOrEqual(32);
      expect(statSync(p.passwordFile).mode & 0o777).toBe(0o600);
      expect(statSync(embeddedInfoFile(dir)).mode & 0o777).toBe(0o600);
      expect(JSON.parse(readFileSync(embeddedInfoFile(dir), "utf8")).url).toBe(db.url);

      const settings = await query(db.url, async (sql) => {
        const rows = await sql<{ name: string; setting: string }[]>`
          select name, setting from pg_settings
          where name in ('server_version_num', 'listen_addresses', 'unix_socket_directories', 'password_encryption')`;
        return Object.fromEntries(rows.map((r) => [r.name, r.setting]));
      });
      expect(Number(settings.server_version_num)).toBeGreaterThanOrEqual(180000);
      expect(settings.listen_addresses).toBe("127.0.0.1");
      expect(settings.unix_socket_directories).toBe("");
      expect(settings.password_encryption).toBe("scram-sha-256");

      const noPassword = `postgres://postgres@127.0.0.1:${db.port}/postgres`;
      await expect(query(noPassword, (sql) => sql`select 1`)).rejects.toThrow();
      const wrong = `postgres://postgres:not-the-password@127.0.0.1:${db.port}/postgres`;
      await expect(query(wrong, (sql) => sql`select 1`)).rejects.toThrow(/password authentication failed/);
    } finally {
      await db.stop();
    }
    expect(existsSync(embeddedInfoFile(dir))).toBe(false);
    expect(existsSync(path.join(embeddedPaths(dir).cluster, "postmaster.pid"))).toBe(false);
  });

  it("keeps its data across restarts, and starts after its server was killed (stale postmaster.pid)", async () => {
    const dir = dataDir();
    const first = await startAppEmbeddedDb(dir);
    await query(first.url, (sql) =>
      sql.unsafe("create table kept (v text); insert into kept values ('before the crash')"),
    );
    process.kill(first.pid, "SIGKILL"); // the postmaster dies; its pid file stays
    await expect.poll(() => pidAlive(first.pid)).toBe(false);
    expect(existsSync(path.join(embeddedPaths(dir).cluster, "postmaster.pid"))).toBe(true);

    const second = await startAppEmbeddedDb(dir);
    try {
      expect(await query(second.url, (sql) => sql`select v from kept`)).toEqual([{ v: "before the crash" }]);
    } finally {
      await second.stop();
    }
  });

  it("stops a killed server's process still working in its folder before starting a new server there", async () => {
    const dir = dataDir();
    const first = await startAppEmbeddedDb(dir);
    process.kill(first.pid, "SIGKILL");
    await expect.poll(() => pidAlive(first.pid)).toBe(false);
    // A backend of the killed postmaster, still at work in the data folder (a long sort).
    const orphan = spawn("bash", ["-c", 'exec -a "postgres: postgres postgres 127.0.0.1 SELECT" sleep 60'], {
      cwd: embeddedPaths(dir).cluster,
      stdio: "ignore",
    });
    await expect.poll(() => readFileSync(`/proc/${orphan.pid}/cmdline`, "utf8")).toMatch(/^postgres: /);
    const second = await startAppEmbeddedDb(dir);
    try {
      // Before: the pid file was removed under it, and a new server recovered the folder it wrote to.
      expect(pidAlive(orphan.pid!)).toBe(false);
      expect(await query(second.url, (sql) => sql`select 1 as one`)).toEqual([{ one: 1 }]);
    } finally {
      await second.stop();
      orphan.kill("SIGKILL");
    }
  });

  it("shuts down a server left running by a killed launcher before starting its own", async () => {
    const dir = dataDir();
    const orphan = await startAppEmbeddedDb(dir); // never stopped: as if its launcher got kill -9
    await query(orphan.url, (sql) => sql.unsafe("create table t (v int); insert into t values (1)"));
    const next = await startAppEmbeddedDb(dir);
    try {
      expect(pidAlive(orphan.pid)).toBe(false);
      expect(await query(next.url, (sql) => sql`select v from t`)).toEqual([{ v: 1 }]);
    } finally {
      await next.stop();
    }
  });

  it("removes a pid file that names an unrelated live process", async () => {
    const dir = dataDir();
    const db = await startAppEmbeddedDb(dir);
    await db.stop();
    // After a reboot, the pid in a stale file may belong to anything: here, this test process.
    const pidFile = path.join(embeddedPaths(dir).cluster, "postmaster.pid");
    writeFileSync(pidFile, `${process.pid}\n${embeddedPaths(dir).cluster}\n`);
    const again = await startAppEmbeddedDb(dir);
    await again.stop();
  });

  it("sets a new password when its password file was lost", async () => {
    const dir = dataDir();
    const p = embeddedPaths(dir);
    const first = await startAppEmbeddedDb(dir);
    await query(first.url, (sql) => sql`create table t (v int)`);
    await first.stop();
    const old = readFileSync(p.passwordFile, "utf8");
    rmSync(p.passwordFile);
    const second = await startAppEmbeddedDb(dir);
    try {
      expect(readFileSync(p.passwordFile, "utf8")).not.toBe(old);
      expect(await query(second.url, (sql) => sql`select count(*)::int as n from t`)).toEqual([{ n: 0 }]);
    } finally {
      await second.stop();
    }
  });

  it("moves the data of an earlier version's PGlite folder into the new server, once", async () => {
    const dir = dataDir();
    const { PGlite } = await import("@electric-sql/pglite");
    const { drizzle } = await import("drizzle-orm/pglite");
    const { migrate } = await import("drizzle-orm/pglite/migrator");
    const legacy = await PGlite.create(path.join(dir, "pgdata"));
    // The schema the last PGlite version had: its first three migrations.
    const old = migrationsUpTo(3);
    await migrate(drizzle(legacy), { migrationsFolder: old.folder });
    old.remove();
    await legacy.exec(`
      insert into teams (id, slug, name) values ('team_old', 'old', 'Old team');
      insert into pipelines (id, team_id, name) values ('pipe_old', 'team_old', 'kept');
      insert into samples (id, pipeline_id, team_id, messages, length, metadata, created_at)
        values ('smp_old', 'pipe_old', 'team_old', '[{"role":"user","content":"héllo \u2603"}]', 1,
                '{"lang":"fr"}', '2025-01-02 03:04:05.123456+00');`);
    await legacy.close();

    const lines: string[] = [];
    const db = await startAppEmbeddedDb(dir, { log: (l) => lines.push(l) });
    try {
      const rows = await query(
        db.url,
        (sql) => sql`select s.id, s.messages, s.metadata, s.created_at::text as created_at, p.name, t.slug
                     from samples s join pipelines p on p.id = s.pipeline_id join teams t on t.id = s.team_id`,
      );
      expect(rows).toEqual([
        {
          id: "smp_old",
          messages: [{ role: "user", content: "héllo \u2603" }],
          metadata: { lang: "fr" },
          created_at: "2025-01-02 03:04:05.123456+00",
          name: "kept",
          slug: "old",
        },
      ]);
    } finally {
      await db.stop();
    }
    expect(lines.join("\n")).toMatch(/Moved 1 pipelines, 1 samples, 1 teams/);
    expect(existsSync(path.join(dir, "pgdata"))).toBe(false);
    expect(existsSync(path.join(dir, "pgdata.pglite-backup", "PG_VERSION"))).toBe(true);

    // A second start finds nothing to move; an old folder put back next to data is left alone.
    const again = await startAppEmbeddedDb(dir, { log: (l) => lines.push(l) });
    await again.stop();
    expect(lines.filter((l) => l.includes("Moved"))).toHaveLength(1);
  });
});
