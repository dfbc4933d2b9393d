import { defineConfig, globalIgnores } from "eslint/config";
import nextVitals from "eslint-config-next/core-web-vitals";
import nextTypescript from "eslint-config-next/typescript";

export default defineConfig([
  ...nextVitals,
  ...nextTypescript,
  globalIgnores([
    ".next/**",
    ".next-*/**",
    "node_modules/**",
    ".data/**",
    "drizzle/**",
    "test-results/**",
    "playwright-report/**",
    "next-env.d.ts",
  ]),
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  // The dependency arrow points one way: app/ and workers/ depend on lib/, never the reverse.
  {
    files: ["lib/**/*.{ts,tsx}"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["@/app/*", "@/components/*", "@/workers/*", "@/scripts/*"],
              message: "lib/ must not depend on app/, components/, workers/ or scripts/.",
            },
            {
              group: [
                "../app/*",
                "../../app/*",
                "../components/*",
                "../../components/*",
                "../workers/*",
                "../../workers/*",
              ],
              message: "lib/ must not depend on app/, components/ or workers/.",
            },
          ],
        },
      ],
    },
  },
  {
    files: ["components/**/*.{ts,tsx}"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["@/app/*", "@/workers/*", "@/lib/db/*", "@/lib/services/*"],
              message: "components/ use lib/ types and client helpers only.",
            },
          ],
        },
      ],
    },
  },
  {
    files: ["workers/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        { patterns: [{ group: ["@/app/*", "@/components/*"], message: "workers/ depend on lib/ only." }] },
      ],
    },
  },
]);
