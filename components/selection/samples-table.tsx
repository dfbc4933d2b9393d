"use client";

import type { SampleDto } from "@/lib/contracts/pipelines";
import { cx } from "../ui/cx";
import { TableHead, tableBody, type Column } from "../ui/table";
import { Time } from "../ui/time";

const columns: Column[] = [
  { label: "Id" },
  { label: "Created" },
  { label: "userId" },
  { label: "groupId" },
  { label: "Metadata" },
  { label: "Length", align: "right" },
];

type Props = {
  samples: SampleDto[];
  selectedId: string | undefined;
  onOpen: (id: string) => void;
  onMetadataClick: (key: string, value: string) => void;
};

export function SamplesTable({ samples, selectedId, onOpen, onMetadataClick }: Props) {
  return (
    <table className="w-full table-fixed text-sm" data-testid="samples-table">
      <caption className="sr-only">Samples of the selection. J and K, or the arrow keys, move between rows.</caption>
      <colgroup>
        <col className="w-56" />
        <col className="w-32" />
        <col className="w-32" />
        <col className="w-32" />
        <col />
        <col className="w-20" />
      </colgroup>
      <TableHead columns={columns} dense />
      <tbody className={tableBody}>
        {samples.map((s) => {
          const selected = s.id === selectedId;
          return (
            <tr
              key={s.id}
              data-sample-id={s.id}
              tabIndex={0}
              aria-selected={selected}
              onClick={() => onOpen(s.id)}
              onKeyDown={(e) => {
                // The row's own keys: Enter on a metadata chip inside it is the chip's click.
                if (e.target === e.currentTarget && (e.key === "Enter" || e.key === " ")) {
                  e.preventDefault();
                  onOpen(s.id);
                }
              }}
              className={cx(
                "cursor-pointer outline-none focus-visible:bg-indigo-50/70 dark:focus-visible:bg-indigo-950/40",
                selected
                  ? "bg-indigo-50 shadow-[inset_3px_0_0] shadow-indigo-500 dark:bg-indigo-950/50"
                  : "hover:bg-zinc-50 dark:hover:bg-zinc-800/40",
              )}
            >
              <td className="truncate px-3 py-2.5 font-mono text-xs">{s.id}</td>
              <td className="px-3 py-2.5 text-zinc-600 dark:text-zinc-400">
                <Time iso={s.createdAt} />
              </td>
              <td className="truncate px-3 py-2.5">{s.userId ?? <span className="text-zinc-400">—</span>}</td>
              <td className="truncate px-3 py-2.5">{s.groupId ?? <span className="text-zinc-400">—</span>}</td>
              <td className="px-3 py-2">
                <div className="flex flex-wrap gap-1">
                  {Object.entries(s.metadata ?? {}).map(([k, v]) => (
                    <button
                      key={k}
                      type="button"
                      title={`Filter by ${k} = ${v}`}
                      onClick={(e) => {
                        e.stopPropagation();
                        onMetadataClick(k, v);
                      }}
                      className="max-w-full truncate rounded bg-zinc-100 px-1.5 py-0.5 font-mono text-[11px] text-zinc-700 hover:bg-indigo-100 hover:text-indigo-700 dark:bg-zinc-800 dark:text-zinc-300 dark:hover:bg-indigo-950 dark:hover:text-indigo-300"
                    >
                      {k}={v}
                    </button>
                  ))}
                </div>
              </td>
              <td className="px-3 py-2.5 text-right tabular-nums">{s.length}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
