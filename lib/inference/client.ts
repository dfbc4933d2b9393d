// Typed fetch client for the worker's internal inference API (see server.ts for the protocol).
import type {
  GenerationErrorBody,
  GenerationRequestInput,
  GenerationResult,
  GenerationStreamEvent,
} from "@/lib/contracts/generation";

export class InferenceError extends Error {
  constructor(
    readonly status: number,
    readonly type: GenerationErrorBody["error"]["type"],
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = "InferenceError";
  }
}

export interface InferenceClientOptions {
  url: string;
  secret: string;
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export class InferenceClient {
  private readonly fetch: typeof fetch;

  constructor(private readonly opts: InferenceClientOptions) {
    this.fetch = opts.fetch ?? fetch;
  }

  async generate(request: GenerationRequestInput, opts: CallOptions = {}): Promise<GenerationResult> {
    const res = await this.post("/generate", request, opts.signal);
    return (await res.json()) as GenerationResult;
  }

  /** Events as they arrive; an "error" event mid-stream is thrown as an InferenceError. */
  async *stream(request: GenerationRequestInput, opts: CallOptions = {}): AsyncIterable<GenerationStreamEvent> {
    const res = await this.post("/generate-stream", request, opts.signal);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let nl: number;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (!line) continue;
          const event = JSON.parse(line) as GenerationStreamEvent;
          if (event.type === "error")
            throw new InferenceError(500, event.error.type, event.error.message, event.error.param);
          yield event;
        }
      }
    } finally {
      await reader.cancel().catch(() => {}); // closing early disconnects, which cancels the generation
    }
  }

  async health(): Promise<{ status: string; models: string[] }> {
    const res = await this.fetch(`${this.opts.url}/health`, {
      headers: { authorization: `Bearer ${this.opts.secret}` },
    });
    if (!res.ok) throw await toError(res);
    return (await res.json()) as { status: string; models: string[] };
  }

  private async post(path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
    const res = await this.fetch(`${this.opts.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${this.opts.secret}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
    if (!res.ok) throw await toError(res);
    return res;
  }
}

async function toError(res: Response): Promise<InferenceError> {
  const body = (await res.json().catch(() => null)) as GenerationErrorBody | null;
  return new InferenceError(
    res.status,
    body?.error?.type ?? "internal",
    body?.error?.message ?? `HTTP ${res.status}`,
    body?.error?.param,
  );
}
