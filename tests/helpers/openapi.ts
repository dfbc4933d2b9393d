import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { expect } from "vitest";
import { baseUrl } from "./context";

/**
 * Responses checked against the app's own OpenAPI document (GET /v1/openapi.json), with an
 * independent JSON Schema validator (Ajv, draft 2020-12: OpenAPI 3.1's dialect): what the API
 * answers must be what it publishes.
 */
type Doc = { paths: Record<string, Record<string, any>>; components: Record<string, unknown> };
let doc: Promise<Doc> | undefined;
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
// zod writes `format: "starts_with"` beside the prefix pattern (the pattern is what checks it).
ajv.addFormat("starts_with", true);
const compiled = new Map<string, ReturnType<Ajv2020["compile"]>>();

export function openApiDocument(): Promise<Doc> {
  doc ??= fetch(`${baseUrl}/v1/openapi.json`).then((r) => r.json() as Promise<Doc>);
  return doc;
}

/** Expects `res` (its status and JSON body) to be a response the document declares for the operation. */
export async function expectDocumented(
  method: string,
  template: string,
  res: { status: number; json: unknown },
): Promise<void> {
  const d = await openApiDocument();
  const op = d.paths[template]?.[method.toLowerCase()];
  expect(op, `${method} ${template} is in the document`).toBeDefined();
  const response = op.responses[String(res.status)];
  expect(response, `${method} ${template} declares status ${res.status}`).toBeDefined();
  const schema = response.content?.["application/json"]?.schema;
  if (!schema) return;
  const key = `${method} ${template} ${res.status}`;
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile({ ...schema, components: d.components });
    compiled.set(key, validate);
  }
  const ok = validate(res.json);
  expect(ok, `${key}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(res.json).slice(0, 500)}`).toBe(true);
}
