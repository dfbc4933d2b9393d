"use client";

import { useEffect, useId, useRef, type ReactNode } from "react";

/**
 * A modal on the native <dialog>: focus is trapped and restored, Escape closes it, and the
 * rest of the page is inert, all by the browser. `dismissible={false}` keeps it open on Escape
 * (what it shows would be lost: a key's secret, shown once); only its own buttons close it.
 */
export function Dialog({
  open,
  onClose,
  title,
  description,
  children,
  testId,
  dismissible = true,
}: {
  open: boolean;
  onClose: () => void;
  title: string;
  description?: ReactNode;
  children: ReactNode;
  testId?: string;
  dismissible?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    if (open && !el.open) el.showModal();
    if (!open && el.open) el.close();
  }, [open]);
  return (
    <dialog
      ref={ref}
      aria-labelledby={titleId}
      data-testid={testId}
      onClose={() => {
        // Browsers close a modal on a repeated Escape even when its cancel is prevented.
        if (!dismissible && open) ref.current?.showModal();
        else onClose();
      }}
      onCancel={(e) => {
        e.preventDefault();
        if (dismissible) onClose();
      }}
      className="m-auto w-full max-w-md rounded-xl border border-zinc-200 bg-white p-0 text-zinc-900 shadow-xl backdrop:bg-zinc-950/50 dark:border-zinc-800 dark:bg-zinc-900 dark:text-zinc-100"
    >
      {open ? (
        <div className="p-6">
          <h2 id={titleId} className="text-base font-semibold">
            {title}
          </h2>
          {description ? <div className="mt-1 text-sm text-zinc-500 dark:text-zinc-400">{description}</div> : null}
          <div className="mt-5">{children}</div>
        </div>
      ) : null}
    </dialog>
  );
}
