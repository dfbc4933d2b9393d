import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];
const root = path.resolve(import.meta.dirname, "../..");

/** The route files of the App Router's API: the hosted API's and the dashboard's. */
function routeFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith("route.ts"))
    .map((f) => path.join(dir, f));
}

describe("App Router API routes", () => {
  it("answer every method, those they do not serve with the error body's 405 (otherMethods), not Next's bare one", () => {
    const files = [...routeFiles("app/v1"), ...routeFiles("app/api/ui")];
    expect(files.length).toBeGreaterThan(30);
    const missing: string[] = [];
    for (const file of files) {
      const text = readFileSync(path.join(root, file), "utf8");
      const refused = /export const \{([^}]*)\} = otherMethods\(/.exec(text)?.[1] ?? "";
      for (const m of METHODS) {
        const served = new RegExp(`export (const|async function|function) ${m}\\b`).test(text);
        if (!served && !new RegExp(`\\b${m}\\b`).test(refused)) missing.push(`${file} ${m}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
