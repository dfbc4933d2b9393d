// npm run lock:fix — run after any change to dependencies.
//
// The registry reachable from this project's machines serves only the packages installable
// here, so npm writes no lock entries for other platforms' optional binaries (for example
// @tailwindcss/oxide-darwin-arm64), and `npm ci` then refuses the lock as "out of sync".
// This adds a version-only entry for each such optional dependency: npm ci accepts the lock,
// skips what it cannot fetch here (optional), and fetches the right binary on other platforms.
import { readFileSync, writeFileSync } from "node:fs";
const file = process.argv[2] ?? new URL("../package-lock.json", import.meta.url).pathname;
const lock = JSON.parse(readFileSync(file, "utf8"));
const pk = lock.packages;
let added = 0;
for (const [key, entry] of Object.entries(pk)) {
  for (const [name, spec] of Object.entries(entry.optionalDependencies ?? {})) {
    // resolution: nested first, then hoisted
    const nested = `${key}/node_modules/${name}`;
    const top = `node_modules/${name}`;
    if (pk[nested] || pk[top]) continue;
    pk[top] = { version: spec, optional: true, ...(entry.dev ? { dev: true } : {}) };
    added++;
  }
}
lock.packages = Object.fromEntries(
  Object.entries(pk).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b))),
);
writeFileSync(file, JSON.stringify(lock, null, 2) + "\n");
console.log(`lock:fix: added ${added} optional platform entries`);
