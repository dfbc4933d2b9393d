import { inject } from "vitest";
import { connect, type DbHandle } from "@/lib/db/client";
import { createApiKey } from "@/lib/services/api-keys";
import { createTeam } from "@/lib/services/teams";
import { randomToken } from "@/lib/ids";

export const baseUrl = inject("baseUrl");
// The test process signs and checks URLs with the app's secret and public URL.
process.env.AUTH_SECRET = inject("authSecret");
process.env.PUBLIC_URL = baseUrl;
process.env.DATABASE_URL = inject("databaseUrl");
process.env.DATA_DIR = inject("dataDir");

let handle: DbHandle | undefined;
export function db(): DbHandle {
  handle ??= connect(inject("databaseUrl"), { max: 4 });
  return handle;
}

export type TestTeam = {
  id: string;
  slug: string;
  apiKey: string;
  modelKey: string;
  /** The API key's id. */
  keyId: string;
  modelKeyId: string;
};

/** A fresh team with an API key and a model key: every test gets its own world. */
export async function makeTeam(): Promise<TestTeam> {
  const team = await createTeam(db().db, { slug: `t-${randomToken(10)}` });
  const api = await createApiKey(db().db, { teamId: team.id, kind: "api", name: "test" });
  const model = await createApiKey(db().db, { teamId: team.id, kind: "model", name: "test" });
  return {
    id: team.id,
    slug: team.slug,
    apiKey: api.secret,
    modelKey: model.secret,
    keyId: api.key.id,
    modelKeyId: model.key.id,
  };
}

/** A small HTTP client for the hosted API. */
export function client(apiKey?: string) {
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(baseUrl + path, {
      method,
      headers: {
        ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json: unknown = undefined;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON
    }
    return { status: res.status, json: json as any, text, headers: res.headers };
  };
  return {
    get: (path: string, headers?: Record<string, string>) => call("GET", path, undefined, headers),
    post: (path: string, body?: unknown, headers?: Record<string, string>) => call("POST", path, body, headers),
    call,
  };
}
