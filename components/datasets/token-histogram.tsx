"use client";

import { Bar, BarChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";

/** Included samples by token count, one bar per bin of `binWidth` tokens (Recharts). */
export function TokenHistogram({ binWidth, counts }: { binWidth: number; counts: number[] }) {
  const data = counts.map((count, i) => ({
    bin: binWidth === 1 ? String(i) : `${i * binWidth}–${(i + 1) * binWidth - 1}`,
    count,
  }));
  return (
    <div data-testid="token-histogram" className="h-72 w-full" role="img" aria-label="Histogram of token counts">
      <ResponsiveContainer width="100%" height="100%">
        <BarChart data={data} margin={{ top: 8, right: 16, bottom: 24, left: 8 }}>
          <CartesianGrid strokeDasharray="3 3" vertical={false} stroke="#e4e4e7" />
          <XAxis
            dataKey="bin"
            tick={{ fontSize: 11 }}
            interval="preserveStartEnd"
            label={{ value: "tokens per sample", position: "insideBottom", offset: -12, fontSize: 12 }}
          />
          <YAxis allowDecimals={false} tick={{ fontSize: 11 }} width={48} />
          <Tooltip formatter={(v) => [v, "samples"]} labelFormatter={(l) => `${l} tokens`} />
          <Bar dataKey="count" fill="#6366f1" radius={[3, 3, 0, 0]} isAnimationActive={false} />
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}
