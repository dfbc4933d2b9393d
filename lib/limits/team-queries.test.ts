import { describe, expect, it } from "vitest";
import { withQuerySlots } from "./testing";
import { releasingAfter, takeQuerySlot } from "./team-queries";

describe("a team's selection query slots", () => {
  withQuerySlots(2, 200);

  it("run a team's queries two at a time, the next in line when one ends; another team's at once", async () => {
    const a1 = await takeQuerySlot("team-a");
    const a2 = await takeQuerySlot("team-a");
    let third = false;
    const a3 = takeQuerySlot("team-a").then((release) => ((third = true), release));
    const b1 = await takeQuerySlot("team-b"); // another team is not held back
    await new Promise((r) => setTimeout(r, 20));
    expect(third).toBe(false);
    a1();
    a1(); // a second release changes nothing
    const release3 = await a3;
    expect(third).toBe(true);
    // Still two running (a2 and the third): a fourth waits, and past the wait is a 429.
    await expect(takeQuerySlot("team-a")).rejects.toMatchObject({
      status: 429,
      message: "Your team already has 2 selection queries running; retry when one ends.",
    });
    a2();
    release3();
    b1();
    const again = [await takeQuerySlot("team-a"), await takeQuerySlot("team-a")];
    again.forEach((r) => r());
  });

  it("are released by a stream of rows when it ends, fails or is given up before its first row", async () => {
    const consume = async (items: AsyncIterable<number>) => {
      const seen = [];
      for await (const n of items) seen.push(n);
      return seen;
    };
    for (const use of ["read", "fail", "give up"] as const) {
      const release = await takeQuerySlot("team-s");
      const held = releasingAfter(
        (async function* () {
          yield 1;
          if (use === "fail") throw new Error("boom");
          yield 2;
        })(),
        release,
      );
      if (use === "read") expect(await consume(held)).toEqual([1, 2]);
      if (use === "fail") await expect(consume(held)).rejects.toThrow("boom");
      if (use === "give up") await held[Symbol.asyncIterator]().return!();
    }
    // Every slot came back: both can be taken at once (a leaked one would make this a 429).
    const both = [await takeQuerySlot("team-s"), await takeQuerySlot("team-s")];
    both.forEach((r) => r());
  });
});
