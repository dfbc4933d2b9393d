import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { baseUrl, client, makeTeam } from "../helpers/context";
import { expectDocumented, openApiDocument } from "../helpers/openapi";

const root = path.resolve(import.meta.dirname, "../..");
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

/** Every /v1 and deployment route of the app (App Router and Pages Router), as OpenAPI templates. */
function appRoutes(): string[] {
  const template = (segments: string[]) =>
    "/" + segments.map((s) => s.replace(/^\[(?:\.\.\.)?(\w+)\]$/, "{$1}")).join("/");
  const out: string[] = [];
  for (const file of walk(path.join(root, "app"))) {
    const rel = path.relative(path.join(root, "app"), file);
    if (!rel.endsWith("route.ts")) continue;
    const segments = path.dirname(rel).split(path.sep);
    if (segments[0] !== "v1" && segments[0] !== "deployments") continue;
    if (segments[1] === "[...path]") continue; // the catch-all 404 of unknown paths
    const text = readFileSync(file, "utf8");
    for (const m of METHODS) if (new RegExp(`export const ${m}\\b`).test(text)) out.push(`${m} ${template(segments)}`);
  }
  for (const file of ["v1", "deployments"].flatMap((dir) => walk(path.join(root, "pages/api", dir)))) {
    const rel = path.relative(path.join(root, "pages/api"), file).replace(/\.ts$/, "");
    const text = readFileSync(file, "utf8");
    for (const m of METHODS) if (text.includes(`method: "${m}"`)) out.push(`${m} ${template(rel.split(path.sep))}`);
  }
  return out;
}

/** Operations that take no body (documented without one, and the app reads none). */
const BODILESS = new Set(["POST /v1/imports/{id}/cancel"]);

describe("the OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document by an independent validator", async () => {
    const res = await client().get("/v1/openapi.json");
    expect(res.status).toBe(200);
    expect(res.json.openapi).toBe("3.1.0");
    expect(res.json.servers).toEqual([{ url: baseUrl }]);
    const result = await new Validator().validate(res.json);
    expect(result.errors ?? [], JSON.stringify(result.errors ?? []).slice(0, 2000)).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it("covers every /v1 route and the deployment endpoints, with bodies, responses and the error body", async () => {
    const doc = await openApiDocument();
    const routes = appRoutes();
    expect(routes.length).toBeGreaterThan(20);
    for (const route of routes) {
      const [method, template] = route.split(" ") as [string, string];
      const op = doc.paths[template]?.[method.toLowerCase()];
      expect(op, `${route} is documented`).toBeDefined();
      const statuses = Object.keys(op.responses);
      expect(
        statuses.some((s) => s.startsWith("2")),
        `${route} has a success response`,
      ).toBe(true);
      expect(op.responses["500"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Error" });
      // Every POST and PATCH takes a body, but a cancel: it has nothing to say beyond its path.
      if ((method === "POST" || method === "PATCH") && !BODILESS.has(route))
        expect(op.requestBody, `${route} has a body`).toBeDefined();
    }
    // Nothing documented that the app does not serve.
    const documented = Object.entries(doc.paths).flatMap(([t, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${t}`),
    );
    expect(documented.sort()).toEqual([...new Set(routes)].sort());
  });

  it("describes what the API answers: successes and errors validate against it", async () => {
    const api = client((await makeTeam()).apiKey);
    const created = await api.post("/v1/pipelines/create", { name: "documented" });
    await expectDocumented("POST", "/v1/pipelines/create", created);
    const id = created.json.id as string;
    await expectDocumented("GET", "/v1/pipelines/{id}", await api.get(`/v1/pipelines/${id}`));
    await expectDocumented("GET", "/v1/pipelines/list", await api.get("/v1/pipelines/list"));
    await expectDocumented(
      "POST",
      "/v1/pipelines/{id}/add",
      await api.post(`/v1/pipelines/${id}/add`, { messages: [{ role: "user", content: "hi" }], metadata: { a: "b" } }),
    );
    await expectDocumented("POST", "/v1/pipelines/{id}/samples", await api.post(`/v1/pipelines/${id}/samples`, {}));
    await expectDocumented("POST", "/v1/pipelines/{id}/count", await api.post(`/v1/pipelines/${id}/count`, {}));
    const bad = await api.post(`/v1/pipelines/${id}/add`, { messages: [{ role: "robot", content: "x" }] });
    expect(bad.status).toBe(400);
    await expectDocumented("POST", "/v1/pipelines/{id}/add", bad);
    const unknown = await api.get("/v1/pipelines/pipe_00000000000000000000");
    expect(unknown.status).toBe(404);
    await expectDocumented("GET", "/v1/pipelines/{id}", unknown);
    const unauthorized = await client("lmp_sk_nope").get("/v1/pipelines/list");
    expect(unauthorized.status).toBe(401);
    await expectDocumented("GET", "/v1/pipelines/list", unauthorized);
    const dataset = await api.post(`/v1/pipelines/${id}/create-dataset`, { name: "documented" });
    await expectDocumented("POST", "/v1/pipelines/{id}/create-dataset", dataset);
    await expectDocumented("GET", "/v1/datasets/list", await api.get("/v1/datasets/list"));
  });
});
