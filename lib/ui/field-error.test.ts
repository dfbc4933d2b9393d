import { describe, expect, it } from "vitest";
import { serverFieldError } from "./field-error";

describe("serverFieldError", () => {
  const fields = ["name", "upstream"] as const;
  it("puts a refusal under the field its param names, by the param's top-level name", () => {
    expect(serverFieldError({ message: "taken", param: "name" }, fields)).toEqual({ name: "taken" });
    expect(serverFieldError({ message: "local address", param: "upstream.urls[0]" }, fields)).toEqual({
      upstream: "local address",
    });
    expect(serverFieldError({ message: "bad", param: "upstream[1]" }, fields)).toEqual({ upstream: "bad" });
  });

  it("shows above the form what no field shows", () => {
    expect(serverFieldError({ message: "busy" }, fields)).toEqual({ form: "busy" });
    expect(serverFieldError({ message: "no", param: "teamId" }, fields)).toEqual({ form: "no" });
  });
});
