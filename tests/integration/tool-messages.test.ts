import { describe, expect, it } from "vitest";
import { client, makeTeam } from "../helpers/context";
import { download, parseLines, waitForStatus } from "../helpers/datasets";
import { expectDocumented } from "../helpers/openapi";

const conversation = [
  { role: "system", content: "You call tools." },
  { role: "user", content: "Weather in Paris?", name: "alice" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
  },
  { role: "tool", tool_call_id: "call_1", content: '{"temp":21}', name: "get_weather" },
  {
    role: "assistant",
    content: "",
    tool_calls: [{ id: "call_2", type: "function", function: { name: "noop", arguments: "" } }],
  },
  { role: "tool", tool_call_id: "call_2", content: "done" },
  { role: "assistant", content: "It is 21 °C." },
];

describe("tool messages", () => {
  it("are stored, returned by the signed URL and packaged into a dataset as given", async () => {
    const api = client((await makeTeam()).apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "tools" })).json.id as string;
    const added = await api.post(`/v1/pipelines/${pipeline}/add`, { messages: conversation });
    expect(added.status, added.text).toBe(200);
    const [sample] = (await api.post(`/v1/pipelines/${pipeline}/samples`, {})).json;
    expect(sample.length).toBe(conversation.length);
    const content = await fetch(sample.url);
    const messages = await content.json();
    expect(messages).toEqual(conversation);
    await expectDocumented("GET", "/v1/samples/{id}/content", { status: content.status, json: messages });

    const plain = await api.post(`/v1/pipelines/${pipeline}/create-dataset`, { name: "tools-jsonl" });
    const valid = await api.post(`/v1/pipelines/${pipeline}/create-dataset`, {
      name: "tools-valid",
      validate: "openai-chat",
      dedupe: true,
    });
    for (const d of [plain, valid]) {
      expect(d.status, d.text).toBe(200);
      const ready = await waitForStatus(api, d.json.id, "READY");
      expect(ready.size).toBe(1);
      expect(parseLines(await download(api, d.json.id))).toEqual([{ messages: conversation }]);
    }
  });

  it("are validated: each field named in the 400, and nothing stored", async () => {
    const api = client((await makeTeam()).apiKey);
    const pipeline = (await api.post("/v1/pipelines/create", { name: "tools" })).json.id as string;
    const call = { id: "c", type: "function", function: { name: "f", arguments: "{}" } };
    const cases: [unknown[], string][] = [
      [[{ role: "assistant", content: null }], "messages[0].content"],
      [[{ role: "assistant" }], "messages[0].content"],
      [[{ role: "assistant", content: null, tool_calls: [] }], "messages[0].tool_calls"],
      [[{ role: "assistant", tool_calls: [{ ...call, type: "code" }] }], "messages[0].tool_calls[0].type"],
      [[{ role: "assistant", tool_calls: [{ ...call, id: "" }] }], "messages[0].tool_calls[0].id"],
      [
        [{ role: "assistant", tool_calls: [{ ...call, function: { name: "f" } }] }],
        "messages[0].tool_calls[0].function.arguments",
      ],
      [
        [{ role: "assistant", tool_calls: [{ ...call, function: { name: "f", arguments: {} } }] }],
        "messages[0].tool_calls[0].function.arguments",
      ],
      [[{ role: "assistant", tool_calls: [{ ...call, extra: 1 }] }], "messages[0].tool_calls[0].extra"],
      [[{ role: "tool", content: "r" }], "messages[0].tool_call_id"],
      [[{ role: "tool", content: null, tool_call_id: "c" }], "messages[0].content"],
      [[{ role: "user", content: "x", tool_call_id: "c" }], "messages[0].tool_call_id"],
      [[{ role: "user", content: "x", name: "" }], "messages[0].name"],
      [[{ role: "tool", content: "r", tool_call_id: "c\u0000" }], "messages[0].tool_call_id"],
      [
        [{ role: "assistant", tool_calls: [{ ...call, function: { name: "f", arguments: "\ud800" } }] }],
        "messages[0].tool_calls[0].function.arguments",
      ],
      [[{ role: "function", content: "x" }], "messages[0].role"],
    ];
    for (const [messages, param] of cases) {
      const res = await api.post(`/v1/pipelines/${pipeline}/add`, { messages });
      expect(res.status, JSON.stringify(messages)).toBe(400);
      expect(res.json.error.param, JSON.stringify(messages)).toBe(param);
    }
    expect((await api.post(`/v1/pipelines/${pipeline}/count`, {})).json).toEqual({ count: 0 });
  });
});
