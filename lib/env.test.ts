import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { EnvError, parseEnv } from "./env";

const tmp = () => mkdtempSync(path.join(os.tmpdir(), "lmp-env-"));

describe("parseEnv", () => {
  it("applies the documented defaults", () => {
    const dir = tmp();
    const e = parseEnv({ DATA_DIR: dir });
    expect(e.PORT).toBe(3000);
    expect(e.PUBLIC_URL).toBe("http://localhost:3000");
    expect(e.DATABASE_URL).toBeUndefined();
    expect(e.SIGNED_URL_TTL_SECONDS).toBe(3600);
    expect(e.MAX_BODY_BYTES).toBe(1024 * 1024);
    expect(e.BLOB_DRIVER).toBe("local");
    expect(e.BLOB_DIR).toBe(path.join(dir, "blobs"));
    expect(parseEnv({ DATA_DIR: dir, PORT: "8080" }).PUBLIC_URL).toBe("http://localhost:8080");
    expect(parseEnv({ DATA_DIR: dir, PUBLIC_URL: "https://lm.example.com/" }).PUBLIC_URL).toBe(
      "https://lm.example.com",
    );
  });

  it("takes a worker on every interface with the URL it is reached at", () => {
    const e = parseEnv({ DATA_DIR: tmp(), WORKER_HOST: "0.0.0.0", WORKER_ADVERTISE_URL: "http://10.0.0.5:7001" });
    expect(e.WORKER_ADVERTISE_URL).toBe("http://10.0.0.5:7001");
    expect(parseEnv({ DATA_DIR: tmp(), PUBLIC_URL: "https://lm.example.com" }).PUBLIC_URL).toBe(
      "https://lm.example.com",
    );
  });

  it("parses WORKER_SERVES, and stops on a bad entry with a message naming the variable", () => {
    const dir = tmp();
    expect(parseEnv({ DATA_DIR: dir }).WORKER_SERVES).toEqual([]);
    expect(parseEnv({ DATA_DIR: dir, WORKER_SERVES: "Qwen/*,*@q4" }).WORKER_SERVES.map((p) => p.text)).toEqual([
      "Qwen/*",
      "*@q4",
    ]);
    expect(() => parseEnv({ DATA_DIR: dir, WORKER_SERVES: "org/m@q5" })).toThrow(EnvError);
    expect(() => parseEnv({ DATA_DIR: dir, WORKER_SERVES: "org/m@q5" })).toThrow(/WORKER_SERVES: entry "org\/m@q5"/);
  });

  it("generates AUTH_SECRET once, keeps it in DATA_DIR with mode 0600, and reuses it", () => {
    const dir = tmp();
    const first = parseEnv({ DATA_DIR: dir }).AUTH_SECRET;
    expect(first.length).toBeGreaterThanOrEqual(32);
    expect(readFileSync(path.join(dir, "auth-secret"), "utf8").trim()).toBe(first);
    expect(statSync(path.join(dir, "auth-secret")).mode & 0o777).toBe(0o600);
    expect(parseEnv({ DATA_DIR: dir }).AUTH_SECRET).toBe(first);
    const given = "x".repeat(40);
    expect(parseEnv({ DATA_DIR: dir, AUTH_SECRET: given }).AUTH_SECRET).toBe(given);
    expect(readdirSync(dir)).toEqual(["auth-secret"]); // no temporary file left
  });

  it("refuses an empty or short DATA_DIR/auth-secret, naming it (before: the empty secret was used)", () => {
    const dir = tmp();
    writeFileSync(path.join(dir, "auth-secret"), ""); // a start stopped between creating and writing it
    expect(() => parseEnv({ DATA_DIR: dir }).AUTH_SECRET).toThrow(EnvError);
    expect(() => parseEnv({ DATA_DIR: dir }).AUTH_SECRET).toThrow(/auth-secret holds no secret .*delete it/);
    writeFileSync(path.join(dir, "auth-secret"), "short\n");
    expect(() => parseEnv({ DATA_DIR: dir }).AUTH_SECRET).toThrow(/a secret too short/);
  });

  it.each([
    [{ PORT: "abc" }, "PORT"],
    [{ PORT: "70000" }, "PORT"],
    [{ PUBLIC_URL: "not a url" }, "PUBLIC_URL"],
    [{ DATABASE_URL: "mysql://x" }, "DATABASE_URL"],
    [{ AUTH_SECRET: "short" }, "AUTH_SECRET"],
    [{ SIGNED_URL_TTL_SECONDS: "0" }, "SIGNED_URL_TTL_SECONDS"],
    [{ MAX_BODY_BYTES: "-5" }, "MAX_BODY_BYTES"],
    [{ BLOB_DRIVER: "ftp" }, "BLOB_DRIVER"],
    [{ BLOB_DRIVER: "s3" }, "S3_BUCKET"],
    [{ PUBLIC_URL: "localhost:3000" }, "PUBLIC_URL"],
    [{ HF_ENDPOINT: "javascript:alert(1)" }, "HF_ENDPOINT"],
    [{ S3_ENDPOINT: "ftp://minio:9000" }, "S3_ENDPOINT"],
    [{ TRUST_PROXY_HOPS: "abc" }, "TRUST_PROXY_HOPS"],
    [{ TRUST_PROXY_HOPS: "-1" }, "TRUST_PROXY_HOPS"],
    [{ S3_ACCESS_KEY_ID: "AKIA" }, "S3_SECRET_ACCESS_KEY"],
    [{ S3_SECRET_ACCESS_KEY: "s" }, "S3_ACCESS_KEY_ID"],
    [{ WORKER_HOST: "0.0.0.0" }, "WORKER_ADVERTISE_URL"],
  ])("rejects %o with a message naming %s", (vars, name) => {
    const run = () => parseEnv({ DATA_DIR: tmp(), ...vars });
    expect(run).toThrow(EnvError);
    expect(run).toThrow(new RegExp(`^Invalid configuration:\\n  ${name}:`));
  });
});
