import { createDocument, type ZodOpenApiPathsObject } from "zod-openapi";
import { DatasetSchema } from "../contracts/datasets";
import { ErrorBodySchema } from "../contracts/errors";
import { ImportSchema } from "../contracts/imports";
import { PipelineSchema, SampleSchema } from "../contracts/pipelines";
import { deploymentApi } from "./deployment-api";
import { hostedApi } from "./hosted-api";
import { toOperationObject, type Operation } from "./operation";

/**
 * The OpenAPI 3.1 document of the hosted API and the deployment endpoints, generated from the
 * zod contracts the handlers validate with (lib/contracts) by zod-openapi: request bodies as
 * their input, responses as their output, one error body everywhere. Served at
 * GET /v1/openapi.json and rendered by the dashboard's API reference.
 */
let cached: Record<string, unknown> | undefined;

export function openApiDocument(serverUrl: string): Record<string, unknown> {
  cached ??= build();
  return { ...cached, servers: [{ url: serverUrl }] };
}

function build(): Record<string, unknown> {
  const paths: ZodOpenApiPathsObject = {};
  for (const table of [hostedApi, deploymentApi] as Record<string, Record<string, Operation>>[]) {
    for (const [path, methods] of Object.entries(table)) {
      paths[path] = Object.fromEntries(Object.entries(methods).map(([m, op]) => [m, toOperationObject(op)]));
    }
  }
  return createDocument({
    openapi: "3.1.0",
    info: {
      title: "LM Platform API",
      version: "1",
      description:
        "Pipelines of chat samples, selections, datasets, imports, and deployed models. Every decision the " +
        "contract leaves open is documented in docs/api.md.",
    },
    components: {
      // Named once and referenced wherever they occur (ids are not set with .meta(): a contract
      // module loaded by two bundles would register its id twice).
      schemas: {
        Error: ErrorBodySchema,
        Pipeline: PipelineSchema,
        Sample: SampleSchema,
        Dataset: DatasetSchema,
        Import: ImportSchema,
      },
      securitySchemes: {
        apiKey: { type: "http", scheme: "bearer", description: "An API key (lmp_sk_…), for /v1" },
        modelKey: { type: "http", scheme: "bearer", description: "A model key (lmp_mk_…), for deployments" },
      },
    },
    tags: ["Pipelines", "Samples", "Imports", "Datasets", "Completions", "Deployments", "Usage", "Reference"].map(
      (name) => ({
        name,
      }),
    ),
    paths,
  }) as unknown as Record<string, unknown>;
}
