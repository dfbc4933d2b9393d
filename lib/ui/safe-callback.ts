/**
 * Where to go after signing in: a path on this site, never another origin (no open redirect:
 * `//evil.example` and `/\evil.example` are both read by browsers as another host).
 */
export function safeCallback(url: string | undefined | null): string {
  if (!url || !url.startsWith("/") || url.startsWith("//") || url.includes("\\")) return "/pipelines";
  return url;
}
