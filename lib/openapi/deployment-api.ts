import { z } from "zod";
import { CaptureHeaders } from "../contracts/capture";
import { ChatCompletionBody, ChatCompletionResponse } from "../contracts/chat-completions";
import {
  DeploymentCompletionBody,
  DeploymentCompletionResponse,
  DeploymentDto,
  DeploymentStreamQuery,
} from "../contracts/deployments";
import { CompletionsBody, CompletionsResponse, ModelList, ModelObject } from "../contracts/openai";
import { UsageQuery, UsageResponse } from "../contracts/usage";
import type { Operation } from "./operation";

/**
 * Chat completions and usage on the hosted API, and the deployment endpoints at
 * {PUBLIC_URL}/deployments/{team}/{name}.
 */
const deploymentPath = z.object({
  team: z.string().meta({ description: "The team's slug" }),
  name: z.string().meta({ description: "The deployment's name" }),
});
const events = z.string().meta({ description: "Server-sent events (see docs/api.md)" });

export const deploymentApi: Record<string, Partial<Record<"get" | "post", Operation>>> = {
  "/v1/chat/completions": {
    post: {
      summary: "Chat or prompt completion",
      tags: ["Completions"],
      auth: "api",
      body: ChatCompletionBody,
      headers: CaptureHeaders,
      success: "The completion; with `stream: true`, server-sent events",
      response: ChatCompletionResponse,
      responseTypes: { "text/event-stream": events },
      errors: [400, 404, 413, 503],
    },
  },
  "/v1/completions": {
    post: {
      summary: "Text completion (OpenAI's legacy completions)",
      description:
        "OpenAI's request and response shapes on one of the team's deployments: `prompt`, `echo`, `n`, `logprobs`, " +
        "`stream` with `stream_options.include_usage`, and the deployment endpoint's sampling parameters.",
      tags: ["Completions"],
      auth: "api",
      body: CompletionsBody,
      headers: CaptureHeaders,
      success: "The completion; with `stream: true`, data-only server-sent events ending with [DONE]",
      response: CompletionsResponse,
      responseTypes: { "text/event-stream": events },
      errors: [400, 404, 413, 503],
    },
  },
  "/v1/models": {
    get: {
      summary: "List models (OpenAI's shape)",
      description: "The team's deployments as OpenAI model objects; `id` is the `team/name` the completion paths take.",
      tags: ["Completions"],
      auth: "api",
      success: "The models",
      response: ModelList,
      errors: [],
    },
  },
  "/v1/models/{model}": {
    get: {
      summary: "Get a model (OpenAI's shape)",
      description: "`team/name` (its `/` as a path separator or %2F) or a bare deployment name of the team.",
      tags: ["Completions"],
      auth: "api",
      path: z.object({ model: z.string().meta({ description: "The model's id" }) }),
      success: "The model",
      response: ModelObject,
      errors: [404],
    },
  },
  "/v1/deployments/list": {
    get: {
      summary: "List deployments",
      description: "The team's deployments, each with its model, dtype, URL and state.",
      tags: ["Deployments"],
      auth: "api",
      success: "The deployments",
      response: z.array(DeploymentDto),
      errors: [],
    },
  },
  "/v1/deployments/{name}": {
    get: {
      summary: "Get a deployment",
      tags: ["Deployments"],
      auth: "api",
      path: z.object({ name: z.string().meta({ description: "The deployment's name" }) }),
      success: "The deployment and its state",
      response: DeploymentDto,
      errors: [404],
    },
  },
  "/v1/usage": {
    get: {
      summary: "The team's usage",
      description: "Requests and tokens per day, key or deployment (UTC days, both included; default the last 30).",
      tags: ["Usage"],
      auth: "api",
      // The query's object before its defaults are filled in (UsageQuery transforms it).
      query: UsageQuery.in,
      success: "The rows",
      response: UsageResponse,
      errors: [400],
    },
  },
  "/deployments/{team}/{name}": {
    post: {
      summary: "Deployment completion",
      tags: ["Deployments"],
      auth: "model",
      path: deploymentPath,
      body: DeploymentCompletionBody,
      headers: CaptureHeaders,
      success: "The completions; with `stream: true`, data-only server-sent events ending with [DONE]",
      response: DeploymentCompletionResponse,
      responseTypes: { "text/event-stream": events },
      errors: [400, 403, 404, 413, 503],
    },
    get: {
      summary: "Deployment stream",
      description: "Parameters in the query (also under the example client's names: text, length, stop_sequences).",
      tags: ["Deployments"],
      auth: "model",
      path: deploymentPath,
      query: DeploymentStreamQuery,
      headers: CaptureHeaders,
      success: "`event: update` per piece of text, then `event: end`",
      responseTypes: { "text/event-stream": events },
      errors: [400, 403, 404, 503],
    },
  },
};
