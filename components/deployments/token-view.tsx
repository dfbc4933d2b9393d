"use client";

import { cx } from "../ui/cx";

export type TokenLogprob = { token: string; token_id: number; logprob: number };
export type StreamedToken = TokenLogprob & { top_logprobs: TokenLogprob[] };

const pct = (logprob: number) => `${(100 * Math.exp(logprob)).toFixed(1)}%`;

/** Probability as a background: confident tokens plain, unlikely ones warmer. */
function tone(logprob: number): string {
  const p = Math.exp(logprob);
  if (p > 0.6) return "bg-emerald-100/70 dark:bg-emerald-900/30";
  if (p > 0.25) return "bg-amber-100/80 dark:bg-amber-900/30";
  return "bg-red-100/80 dark:bg-red-900/40";
}

const visible = (t: string) => t.replace(/\n/g, "↵").replace(/ /g, "·");

/** The completion token by token; each token's alternatives are in its tooltip and the table. */
export function TokenView({ tokens }: { tokens: StreamedToken[] }) {
  return (
    <div className="space-y-4">
      <p className="whitespace-pre-wrap font-mono text-sm leading-7" data-testid="token-stream">
        {tokens.map((t, i) => (
          <span
            key={i}
            data-testid="token"
            title={`${pct(t.logprob)} (logprob ${t.logprob.toFixed(3)})\n${t.top_logprobs
              .map((a) => `${JSON.stringify(a.token)} ${pct(a.logprob)}`)
              .join("\n")}`}
            className={cx("rounded-sm px-px", tone(t.logprob))}
          >
            {t.token}
          </span>
        ))}
      </p>
      <div className="max-h-72 overflow-y-auto rounded-md border border-zinc-200 dark:border-zinc-800">
        <table className="w-full text-xs" data-testid="logprobs-table">
          <thead className="sticky top-0 bg-zinc-50 text-left text-zinc-500 dark:bg-zinc-900 dark:text-zinc-400">
            <tr>
              <th className="px-3 py-2 font-medium">#</th>
              <th className="px-3 py-2 font-medium">Token</th>
              <th className="px-3 py-2 text-right font-medium">Probability</th>
              <th className="px-3 py-2 font-medium">Top alternatives</th>
            </tr>
          </thead>
          <tbody className="divide-y divide-zinc-100 font-mono dark:divide-zinc-800">
            {tokens.map((t, i) => (
              <tr key={i}>
                <td className="px-3 py-1.5 text-zinc-400">{i + 1}</td>
                <td className="px-3 py-1.5">{visible(t.token)}</td>
                <td className="px-3 py-1.5 text-right tabular-nums">{pct(t.logprob)}</td>
                <td className="px-3 py-1.5 text-zinc-500 dark:text-zinc-400">
                  {t.top_logprobs.map((a) => `${visible(a.token)} ${pct(a.logprob)}`).join("  ")}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}
