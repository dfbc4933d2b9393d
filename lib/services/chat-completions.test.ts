import { describe, expect, it } from "vitest";
import { connect } from "../db/client";
import { ApiError } from "../errors";
import { freePort } from "../net/free-port";
import { resolveChatModel } from "./chat-completions";

describe("resolveChatModel", () => {
  const team = { id: "team_x", slug: "acme", name: "Acme", createdAt: new Date(), limits: null };

  it("answers another team's deployment with 404 model without a query", async () => {
    const err = await resolveChatModel({} as never, team, "other/demo").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 404, param: "model" });
  });

  it("lets a database failure through instead of calling it an unknown model", async () => {
    const down = connect(`postgres://postgres:x@127.0.0.1:${await freePort()}/postgres`, { max: 1 }); // nobody listens
    try {
      const err = await resolveChatModel(down.db, team, "demo").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(ApiError);
      expect((err as Error).message).toMatch(/ECONNREFUSED/); // the driver's own error, not a 404
    } finally {
      await down.close();
    }
  });
});
