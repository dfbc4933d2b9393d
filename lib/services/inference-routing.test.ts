// Worker errors as the platform's HTTP errors.
import { describe, expect, it } from "vitest";
import { InferenceError } from "../inference/client";
import { toApiError } from "./inference-routing";

describe("toApiError", () => {
  it("keeps a full team queue's own message and says when to retry", () => {
    const message =
      "engine overloaded: 64 of this team's requests already queued for this model (limit 64); retry later";
    const e = toApiError(new InferenceError(429, "rate_limited", message));
    expect(e.status).toBe(429);
    expect(e.type).toBe("rate_limited");
    expect(e.message).toBe(message); // before: "Every worker serving this model is busy"
    expect(e.headers).toEqual({ "retry-after": "1" }); // before: none, against the docs' "every 429"
  });
});
