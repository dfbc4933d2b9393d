// Which chat template a model uses, and rendering a conversation with it. Sources, in the order
// Hugging Face transformers applies them: chat_template.jinja (transformers: "an independent
// chat template file takes priority over template entries in the tokenizer config"), then
// tokenizer_config.json's chat_template, then chat_template.json (the older processor file).
// A model with none gets FALLBACK_CHAT_TEMPLATE, rendered the same way (one code path).
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { PreTrainedTokenizer } from "@huggingface/transformers";
import type { GenerationMessage } from "@/lib/contracts/generation";
import { EngineError } from "./errors";

/** "role: content" lines, then "assistant:" for the model to continue. */
export const FALLBACK_CHAT_TEMPLATE =
  "{% for message in messages %}{{ message['role'] + ': ' + message['content'] + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}";

export type ChatTemplateSource = "chat_template.jinja" | "tokenizer_config.json" | "chat_template.json" | "fallback";

/** A template, or named templates (tokenizer_config.json's list form) of which "default" is used. */
export type ChatTemplate = string | Record<string, string>;

function normalize(value: unknown): ChatTemplate | null {
  if (typeof value === "string" && value.trim()) return value;
  if (Array.isArray(value)) {
    const named = Object.fromEntries(
      value
        .filter(
          (t): t is { name: string; template: string } =>
            typeof t?.name === "string" && typeof t?.template === "string",
        )
        .map((t) => [t.name, t.template]),
    );
    return Object.keys(named).length ? named : null;
  }
  return null;
}

export function resolveChatTemplate(dir: string): { template: ChatTemplate; source: ChatTemplateSource } {
  const read = (f: string) => (existsSync(path.join(dir, f)) ? readFileSync(path.join(dir, f), "utf8") : null);
  const jinja = read("chat_template.jinja");
  if (jinja?.trim()) return { template: jinja, source: "chat_template.jinja" };
  const json = (f: string): Record<string, unknown> => {
    const text = read(f);
    try {
      return text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      return {};
    }
  };
  const fromConfig = normalize(json("tokenizer_config.json").chat_template);
  if (fromConfig) return { template: fromConfig, source: "tokenizer_config.json" };
  const fromJson = normalize(json("chat_template.json").chat_template);
  if (fromJson) return { template: fromJson, source: "chat_template.json" };
  return { template: FALLBACK_CHAT_TEMPLATE, source: "fallback" };
}

/**
 * A conversation as the model expects it, with the assistant turn opened. Errors the template
 * raises (raise_exception: "roles must alternate") are invalid requests.
 */
export function renderChat(tokenizer: PreTrainedTokenizer, messages: GenerationMessage[]): string {
  try {
    return tokenizer.apply_chat_template(messages, { tokenize: false, add_generation_prompt: true }) as string;
  } catch (e) {
    throw new EngineError(
      "invalid_request",
      `messages: the model's chat template refused them: ${(e as Error).message}`,
      "messages",
    );
  }
}
