import { z } from "zod";
import { recordWithoutProto, storable } from "./text";

/**
 * The messages a sample holds: OpenAI's chat shapes as used for fine-tuning, tools included
 * (docs/api.md, "Messages"). Stored, returned and packaged exactly as given; every string must be
 * storable in Postgres (see text.ts). Unknown keys are refused, so nothing is silently dropped.
 */
export const MESSAGE_LIMITS = {
  nameChars: 256,
  toolCallIdChars: 256,
  functionNameChars: 256,
  toolDescriptionChars: 4096,
  tools: 128,
} as const;

const Text = storable(z.string());
const Name = storable(z.string().min(1, "must not be empty").max(MESSAGE_LIMITS.nameChars));
const ToolCallId = storable(z.string().min(1, "must not be empty").max(MESSAGE_LIMITS.toolCallIdChars));

export const ToolCallSchema = z.strictObject({
  id: ToolCallId,
  type: z.literal("function"),
  function: z.strictObject({
    name: storable(z.string().min(1, "must not be empty").max(MESSAGE_LIMITS.functionNameChars)),
    /** The arguments as the model wrote them: a string (usually JSON), kept as given. */
    arguments: Text,
  }),
});

const SystemMessage = z.strictObject({ role: z.literal("system"), content: Text, name: Name.optional() });
const UserMessage = z.strictObject({ role: z.literal("user"), content: Text, name: Name.optional() });
/**
 * With `tool_calls`, `content` may be empty, null or absent; without, it is a string. `weight`
 * (OpenAI's chat fine-tuning): 0 leaves this message out of what the model is trained on.
 */
const AssistantMessage = z
  .strictObject({
    role: z.literal("assistant"),
    content: Text.nullable().optional(),
    name: Name.optional(),
    tool_calls: z.array(ToolCallSchema).min(1, "must contain at least one tool call").optional(),
    weight: z.union([z.literal(0), z.literal(1)], { error: "must be 0 or 1" }).optional(),
  })
  .refine((m) => m.tool_calls !== undefined || typeof m.content === "string", {
    path: ["content"],
    message: "must be a string (it may be null or absent only in a message with tool_calls)",
  });
/** The result of one tool call, answering the assistant's call with the same id. */
const ToolMessage = z.strictObject({
  role: z.literal("tool"),
  content: Text,
  tool_call_id: ToolCallId,
  name: Name.optional(),
});

export const SampleMessageSchema = z.discriminatedUnion(
  "role",
  [SystemMessage, UserMessage, AssistantMessage, ToolMessage],
  {
    error: (issue) =>
      issue.code === "invalid_union" ? 'must be one of "system", "user", "assistant", "tool"' : undefined,
  },
);
export type SampleMessage = z.infer<typeof SampleMessageSchema>;
export type ToolCall = z.infer<typeof ToolCallSchema>;

/** A JSON value of a tool's `parameters` (a JSON Schema): objects, arrays and scalars, every string storable. */
const JsonValue: z.ZodType<unknown> = z.lazy(() =>
  z.union([
    Text,
    z.number(),
    z.boolean(),
    z.null(),
    z.array(JsonValue),
    recordWithoutProto(z.record(Text, JsonValue), "a key of a tool's parameters"),
  ]),
);

/**
 * A tool the conversation's model was offered, as OpenAI's chat fine-tuning lines carry them
 * (`{"messages": [...], "tools": [...]}`): the calls in the messages refer to them by name.
 */
export const ToolDefinitionSchema = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject({
    name: storable(z.string().min(1, "must not be empty").max(MESSAGE_LIMITS.functionNameChars)),
    description: storable(z.string().max(MESSAGE_LIMITS.toolDescriptionChars)).optional(),
    /** The arguments' JSON Schema, as given. */
    parameters: recordWithoutProto(z.record(Text, JsonValue), "a key of a tool's parameters").optional(),
    strict: z.boolean().optional(),
  }),
});
export type ToolDefinition = z.infer<typeof ToolDefinitionSchema>;
