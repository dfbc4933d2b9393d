// Chat requests: `messages` are rendered with the model's chat template (or a plain transcript
// when the model has none) before tokenization; a request gives exactly one of prompt/messages.
import { beforeAll, describe, expect, it } from "vitest";
import { loadModel, type LoadedModel } from "./model-loader";
import { planRequest, renderChat } from "./request-plan";
import { tinyModelDir } from "./testing/models";

let m: LoadedModel;
beforeAll(async () => {
  m = await loadModel(await tinyModelDir());
});

const messages = [
  { role: "system" as const, content: "Be brief." },
  { role: "user" as const, content: "Hi" },
];

describe("chat prompts", () => {
  it("renders messages with the model's template and opens the assistant turn", () => {
    const plan = planRequest(m, { messages, max_tokens: 4 });
    expect(plan.promptText).toBe("<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n");
    expect(plan.promptIds).toEqual(m.tokenizer.encode(plan.promptText, { add_special_tokens: false }));
  });

  it("falls back to a plain transcript for a model without a chat template", () => {
    const bare = { ...m, tokenizer: Object.assign(Object.create(m.tokenizer), { chat_template: null }) };
    expect(renderChat(bare as LoadedModel, messages)).toBe("system: Be brief.\nuser: Hi\nassistant:");
  });

  it("takes exactly one of prompt and messages", () => {
    expect(() => planRequest(m, { prompt: "Hi", messages })).toThrow(/exactly one of prompt and messages/);
    expect(() => planRequest(m, { max_tokens: 4 })).toThrow(/exactly one of prompt and messages/);
    expect(() => planRequest(m, { messages: [{ role: "robot", content: "x" }] })).toThrow();
  });
});
