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
    yield* await this.open(request, opts);
  }

  /**
   * Starts a streamed generation and resolves once the worker has accepted it (validated and
   * queued), so a caller can still answer with an error status; rejects with an InferenceError
   * otherwise. Iterating the result reads the events as they arrive.
   */
  async open(request: GenerationRequestInput, opts: CallOptions = {}): Promise<AsyncIterable<GenerationStreamEvent>> {
    const res = await this.post("/generate-stream", request, opts.signal);
    return readEvents(res);
  }

  async health(): Promise<{ status: string; models: string[]; load?: Record<string, number | string>[] }> {
    const res = await this.fetch(`${this.opts.url}/health`, {
      headers: { authorization: `Bearer ${this.opts.secret}` },
    });
    if (!res.ok) throw await toError(res);
    return (await res.json()) as { status: string; models: string[]; load?: Record<string, number | string>[] };
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

async function* readEvents(res: Response): AsyncIterable<GenerationStreamEvent> {
  // Bytes straight from the body's reader, decoded here: a TextDecoderStream would add a second
  // web stream (and its promise hops) to every token on the way through the app.
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let finished = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        // A worker that went away mid-generation must not look like a complete result.
        if (!finished) throw new InferenceError(502, "internal", "the worker closed the stream before it finished");
        break;
      }
      buffer += decoder.decode(value, { stream: true });
      let start = 0;
      let nl: number;
      while ((nl = buffer.indexOf("\n", start)) >= 0) {
        const line = buffer.slice(start, nl).trim();
        start = nl + 1;
        if (!line) continue;
        const event = JSON.parse(line) as GenerationStreamEvent;
        if (event.type === "error")
          throw new InferenceError(500, event.error.type, event.error.message, event.error.param);
        if (event.type === "done") finished = true;
        yield event;
      }
      buffer = buffer.slice(start);
    }
  } finally {
    await reader.cancel().catch(() => {}); // closing early disconnects, which cancels the generation
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
