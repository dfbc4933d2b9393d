"use client";

import type { ReactNode } from "react";
import { Button } from "./button";
import { Dialog } from "./dialog";
import { ErrorBanner } from "./states";

/** A dialog that asks before a destructive action: Cancel, or the action (disabled while it runs). */
export function ConfirmDialog({
  open,
  onClose,
  title,
  description,
  testId,
  confirmLabel,
  pendingLabel,
  pending,
  error,
  onConfirm,
  children,
}: {
  open: boolean;
  onClose: () => void;
  title: string;
  description: ReactNode;
  testId: string;
  confirmLabel: string;
  pendingLabel: string;
  pending: boolean;
  /** The last attempt's failure, shown above the buttons. */
  error: Error | null;
  onConfirm: () => void;
  /** Choices that go with the action (shown above the buttons). */
  children?: ReactNode;
}) {
  return (
    <Dialog open={open} onClose={onClose} title={title} description={description} testId={testId}>
      {children}
      {error ? <ErrorBanner message={error.message} /> : null}
      <div className="mt-2 flex justify-end gap-2">
        <Button variant="secondary" onClick={onClose}>
          Cancel
        </Button>
        <Button variant="danger" disabled={pending} onClick={onConfirm}>
          {pending ? pendingLabel : confirmLabel}
        </Button>
      </div>
    </Dialog>
  );
}
