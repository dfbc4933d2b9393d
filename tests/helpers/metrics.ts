// GET /metrics, read with an independent parser of the Prometheus text format.
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { baseUrl } from "./context";

export type Family = {
  name: string;
  type: string;
  metrics: { labels?: Record<string, string>; value?: string; count?: string }[];
};
/**
 * The exposition parsed by an independent parser. That parser drops the labels of histogram
 * samples, so histograms are also parsed as their plain series (`_bucket`, `_sum`, `_count`):
 * the same text without their `# TYPE … histogram` lines.
 */
export const scrape = async (url = baseUrl, headers: Record<string, string> = {}) => {
  const res = await fetch(`${url}/metrics`, { headers });
  if (res.status !== 200) return { status: res.status, families: [] as Family[] };
  const text = await res.text();
  const untyped = text.replace(/^# TYPE \S+ histogram$/gm, "");
  const typed = parsePrometheusTextFormat(text) as Family[];
  const names = new Set(typed.map((f) => f.name));
  const plain = (parsePrometheusTextFormat(untyped) as Family[]).filter((f) => !names.has(f.name));
  return { status: res.status, families: [...typed, ...plain] };
};
/** A family by name; one spread over several runs of lines (histograms' plain series) is merged. */
export const family = (families: Family[], name: string): Family | undefined => {
  const found = families.filter((f) => f.name === name);
  return found.length === 0 ? undefined : { ...found[0]!, metrics: found.flatMap((f) => f.metrics) };
};
export const sample = (f: Family | undefined, labels: Record<string, string>) =>
  f?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
