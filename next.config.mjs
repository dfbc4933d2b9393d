/** @type {import('next').NextConfig} */
const nextConfig = {
  // NEXT_DIST_DIR lets parallel checkouts/builds of this tree keep separate build folders.
  distDir: process.env.NEXT_DIST_DIR || ".next",
  // Database drivers and native/wasm packages stay as plain Node requires, not bundled.
  serverExternalPackages: [
    "postgres",
    "@huggingface/transformers",
    "onnxruntime-node",
    "pino",
    "pino-pretty",
    "prom-client",
  ],
  poweredByHeader: false,
  // The high-volume ingest routes and the deployment endpoints are Pages Router API routes (see
  // lib/http/node-api-route.ts): their paths map onto pages/api before the App Router's routes are
  // matched. Their SSE answers are not compressed: the compression of `compress` (on by default)
  // skips a response whose Cache-Control says no-transform, as SSE_HEADERS's does.
  // No page of this app may be framed by another site (clickjacking of the key pages, the
  // playground): both the CSP directive and the older header, on every response.
  async headers() {
    return [
      {
        source: "/:path*",
        headers: [
          { key: "Content-Security-Policy", value: "frame-ancestors 'none'" },
          { key: "X-Frame-Options", value: "DENY" },
          { key: "X-Content-Type-Options", value: "nosniff" },
          { key: "Referrer-Policy", value: "same-origin" },
        ],
      },
    ];
  },
  async rewrites() {
    return {
      beforeFiles: [
        ...["add", "add-batch", "import"].map((route) => ({
          source: `/v1/pipelines/:id/${route}`,
          destination: `/api/v1/pipelines/:id/${route}`,
        })),
        // OpenAI's completion paths too (lib/http/node-api-route.ts).
        ...["chat/completions", "completions"].map((route) => ({
          source: `/v1/${route}`,
          destination: `/api/v1/${route}`,
        })),
        { source: "/metrics", destination: "/api/metrics" },
        // The deployment endpoints too (lib/http/node-deployment-route.ts): all their methods,
        // since a rewrite cannot choose by method.
        { source: "/deployments/:team/:name", destination: "/api/deployments/:team/:name" },
      ],
    };
  },
  // Type checking runs once for the whole repository (`npm run typecheck`, part of `npm test`),
  // not a second time inside every build.
  typescript: { ignoreBuildErrors: true },
  reactStrictMode: true,
};

export default nextConfig;
