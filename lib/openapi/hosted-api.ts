import { z } from "zod";
import { AddBatchBody, AddBatchResponse } from "../contracts/batch";
import { PatchSampleBody } from "../contracts/capture";
import { CreateDatasetBody, DatasetSchema, DownloadQuery, DownloadResponse } from "../contracts/datasets";
import { DeletedResponse, DeleteSamplesBody } from "../contracts/deletion";
import { ImportListQuery, ImportSchema } from "../contracts/imports";
import { SampleMessageSchema } from "../contracts/messages";
import {
  AddSampleBody,
  AddSampleResponse,
  CountBody,
  CountResponse,
  CreatePipelineBody,
  PipelineSchema,
  SampleSchema,
  SelectionBody,
  UpdatePipelineBody,
} from "../contracts/pipelines";
import type { Operation } from "./operation";

/** The hosted API's pipelines, samples, imports and datasets (docs/api.md says what each decides). */
const id = (what: string) => z.object({ id: z.string().meta({ description: `The ${what}'s id` }) });
const pipelineId = id("pipeline");
const signed = z.object({
  expires: z.string().meta({ description: "Unix seconds" }),
  signature: z.string().meta({ description: "HMAC-SHA256, hex" }),
});

export const hostedApi: Record<string, Partial<Record<"get" | "post" | "patch" | "delete", Operation>>> = {
  "/v1/pipelines/create": {
    post: {
      summary: "Create a pipeline",
      tags: ["Pipelines"],
      auth: "api",
      body: CreatePipelineBody,
      idempotent: true,
      success: "The pipeline",
      response: PipelineSchema,
      errors: [400, 409, 413, 422],
    },
  },
  "/v1/pipelines/list": {
    get: {
      summary: "List pipelines",
      description: "The team's pipelines, newest first.",
      tags: ["Pipelines"],
      auth: "api",
      success: "The pipelines",
      response: z.array(PipelineSchema),
      errors: [],
    },
  },
  "/v1/pipelines/{id}": {
    get: {
      summary: "Get a pipeline",
      tags: ["Pipelines"],
      auth: "api",
      path: pipelineId,
      success: "The pipeline",
      response: PipelineSchema,
      errors: [404],
    },
    patch: {
      summary: "Rename a pipeline, set its retention",
      description: "`retentionDays: null` keeps samples forever; absent fields stay as they are.",
      tags: ["Pipelines"],
      auth: "api",
      path: pipelineId,
      body: UpdatePipelineBody,
      success: "The pipeline",
      response: PipelineSchema,
      errors: [400, 404, 413],
    },
    delete: {
      summary: "Delete a pipeline and its samples",
      description: "Gone at once; the workers delete its samples in the background. Its datasets stay.",
      tags: ["Pipelines"],
      auth: "api",
      path: pipelineId,
      success: "Deleted",
      response: DeletedResponse,
      errors: [404],
    },
  },
  "/v1/pipelines/{id}/add": {
    post: {
      summary: "Add a sample",
      tags: ["Samples"],
      auth: "api",
      path: pipelineId,
      body: AddSampleBody,
      idempotent: true,
      success: "The new sample's id, once committed",
      response: AddSampleResponse,
      errors: [400, 404, 409, 413, 422],
    },
  },
  "/v1/pipelines/{id}/add-batch": {
    post: {
      summary: "Add up to 1,000 samples",
      description:
        "One result per sample, in request order: `{id}` or `{error}`. Valid samples are stored whatever the others.",
      tags: ["Samples"],
      auth: "api",
      path: pipelineId,
      body: AddBatchBody,
      idempotent: true,
      success: "One result per sample",
      response: AddBatchResponse,
      errors: [400, 404, 409, 413, 422],
    },
  },
  "/v1/pipelines/{id}/import": {
    post: {
      summary: "Import a JSONL file",
      description:
        "One add body per line, streamed into the blob store; a worker stores the lines. The file may be gzipped (recognised by its first bytes, with or without Content-Encoding: gzip).",
      tags: ["Imports"],
      auth: "api",
      path: pipelineId,
      body: z.string().meta({ description: "JSON Lines: one add body per line (or the same, gzipped)" }),
      bodyType: "application/x-ndjson",
      status: 202,
      success: "The import, PROCESSING",
      response: ImportSchema,
      errors: [400, 404, 413, 507],
    },
  },
  "/v1/imports/{id}": {
    get: {
      summary: "Get an import",
      tags: ["Imports"],
      auth: "api",
      path: id("import"),
      success: "Its status and progress",
      response: ImportSchema,
      errors: [404],
    },
  },
  "/v1/imports/list": {
    get: {
      summary: "List imports",
      description:
        "The team's imports, newest first, at most `limit` (default 20, at most 100); `before` (the last id of a page) continues after it.",
      tags: ["Imports"],
      auth: "api",
      query: ImportListQuery,
      success: "The imports",
      response: z.array(ImportSchema),
      errors: [400, 404],
    },
  },
  "/v1/imports/{id}/cancel": {
    post: {
      summary: "Cancel an import",
      description:
        "A PROCESSING import stops storing lines and becomes CANCELLED; the samples it stored stay (the selection filter `importId` finds them). A CANCELLED import answers as it is; a READY or FAILED one is a 409.",
      tags: ["Imports"],
      auth: "api",
      path: id("import"),
      success: "The import, CANCELLED",
      response: ImportSchema,
      errors: [404, 409],
    },
  },
  "/v1/pipelines/{id}/samples": {
    post: {
      summary: "List a selection's samples",
      description: "Oldest first; `after` (a sample id) continues after that sample.",
      tags: ["Samples"],
      auth: "api",
      path: pipelineId,
      body: SelectionBody,
      success: "The samples",
      response: z.array(SampleSchema),
      errors: [400, 404, 413],
    },
  },
  "/v1/pipelines/{id}/count": {
    post: {
      summary: "Count a selection",
      tags: ["Samples"],
      auth: "api",
      path: pipelineId,
      body: CountBody,
      success: "The count",
      response: CountResponse,
      errors: [400, 404, 413],
    },
  },
  "/v1/pipelines/{id}/delete-samples": {
    post: {
      summary: "Delete a selection's samples",
      description: 'At least one filter, or `"all": true`.',
      tags: ["Samples"],
      auth: "api",
      path: pipelineId,
      body: DeleteSamplesBody,
      success: "How many were deleted",
      response: DeletedResponse,
      errors: [400, 404, 413],
    },
  },
  "/v1/samples/{id}": {
    patch: {
      summary: "Merge labels into a sample's metadata",
      description:
        "Feedback on a sample (a captured completion, say): the keys given replace their values, the others " +
        "stay; the result has the limits of `add`. Selections filter on the new labels at once.",
      tags: ["Samples"],
      auth: "api",
      path: id("sample"),
      body: PatchSampleBody,
      success: "The sample",
      response: SampleSchema,
      errors: [400, 404, 413],
    },
    delete: {
      summary: "Delete a sample",
      tags: ["Samples"],
      auth: "api",
      path: id("sample"),
      success: "Deleted",
      response: DeletedResponse,
      errors: [404],
    },
  },
  "/v1/samples/{id}/content": {
    get: {
      summary: "A sample's messages (signed URL)",
      tags: ["Samples"],
      auth: "signed",
      path: id("sample"),
      query: signed,
      success: "The messages",
      response: z.array(SampleMessageSchema),
      errors: [403, 404],
    },
  },
  "/v1/pipelines/{id}/create-dataset": {
    post: {
      summary: "Create a dataset from a selection",
      tags: ["Datasets"],
      auth: "api",
      path: pipelineId,
      body: CreateDatasetBody,
      idempotent: true,
      success: "The dataset, PROCESSING",
      response: DatasetSchema,
      errors: [400, 404, 409, 413, 422],
    },
  },
  "/v1/datasets/list": {
    get: {
      summary: "List datasets",
      tags: ["Datasets"],
      auth: "api",
      success: "The datasets",
      response: z.array(DatasetSchema),
      errors: [],
    },
  },
  "/v1/datasets/{id}": {
    get: {
      summary: "Get a dataset",
      tags: ["Datasets"],
      auth: "api",
      path: id("dataset"),
      success: "The dataset",
      response: DatasetSchema,
      errors: [404],
    },
    delete: {
      summary: "Delete a dataset",
      tags: ["Datasets"],
      auth: "api",
      path: id("dataset"),
      success: "The deleted dataset",
      response: DatasetSchema,
      errors: [404],
    },
  },
  "/v1/datasets/{id}/download": {
    get: {
      summary: "A signed URL of a dataset's file",
      tags: ["Datasets"],
      auth: "api",
      path: id("dataset"),
      query: DownloadQuery,
      success: "The URL and its expiry",
      response: DownloadResponse,
      errors: [400, 404, 409],
    },
  },
  "/v1/blobs/{key}": {
    get: {
      summary: "A dataset file (signed URL of the local blob driver)",
      description:
        "One byte range (`Range: bytes=a-b`, `a-` or `-n`) is a 206 with that part and `Content-Range`; a range past the end is a 416; several ranges get the whole file.",
      tags: ["Datasets"],
      auth: "signed",
      path: z.object({ key: z.string() }),
      query: signed,
      headers: z.object({
        range: z.string().optional().meta({ description: "One byte range: bytes=a-b, bytes=a- or bytes=-n" }),
      }),
      success: "The file (206: the range asked for)",
      responseTypes: { "application/octet-stream": z.string() },
      errors: [403, 404, 416],
    },
  },
  "/v1/openapi.json": {
    get: {
      summary: "This document",
      tags: ["Reference"],
      auth: "none",
      success: "The OpenAPI 3.1 document",
      response: z.record(z.string(), z.unknown()),
      errors: [],
    },
  },
};
