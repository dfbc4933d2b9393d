import type { ReactNode } from "react";
import { Card } from "./card";
import { cx } from "./cx";

/** A header cell; `srOnly` labels it for screen readers alone (an actions column). */
export type Column = { label: string; align?: "right"; srOnly?: boolean };

const th = "py-2.5 text-left text-xs font-medium uppercase tracking-wide text-zinc-500 dark:text-zinc-400";

/** The header row every dashboard table shares; `dense` narrows the cell padding. */
export function TableHead({ columns, dense = false }: { columns: Column[]; dense?: boolean }) {
  return (
    <thead className="border-b border-zinc-200 bg-zinc-50 dark:border-zinc-800 dark:bg-zinc-900">
      <tr>
        {columns.map((c) => (
          <th key={c.label} className={cx(dense ? "px-3" : "px-4", th, c.align === "right" && "text-right")}>
            {c.srOnly ? <span className="sr-only">{c.label}</span> : c.label}
          </th>
        ))}
      </tr>
    </thead>
  );
}

export const tableBody = "divide-y divide-zinc-100 dark:divide-zinc-800";

/** A list page's table: a card holding the header row and `children` (the rows). */
export function DataTable({ testId, columns, children }: { testId: string; columns: Column[]; children: ReactNode }) {
  return (
    <Card className="overflow-hidden">
      <table className="w-full text-sm" data-testid={testId}>
        <TableHead columns={columns} />
        <tbody className={tableBody}>{children}</tbody>
      </table>
    </Card>
  );
}
