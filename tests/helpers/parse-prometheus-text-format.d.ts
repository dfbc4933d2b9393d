declare module "parse-prometheus-text-format" {
  /** Prometheus text exposition → metric families (an independent parser, for the tests). */
  export default function parsePrometheusTextFormat(text: string): unknown[];
}
