"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import type { InviteDto, TeamRole } from "@/lib/contracts/members";
import { uiFetch } from "../api-client";
import { Badge } from "../ui/badge";
import { Button } from "../ui/button";
import { CopyButton } from "../ui/copy-button";
import { Select } from "../ui/field";
import { ErrorBanner } from "../ui/states";
import { DataTable, type Column } from "../ui/table";
import { Time } from "../ui/time";

const columns: Column[] = [
  { label: "Role" },
  { label: "Created by" },
  { label: "Created" },
  { label: "Expires" },
  { label: "Actions", srOnly: true },
];

/**
 * Owners only: make an invite link (shown once, works once, for 7 days), and see and revoke the
 * links not used yet.
 */
export function InvitesPanel({ initial }: { initial: InviteDto[] }) {
  const [role, setRole] = useState<TeamRole>("member");
  const [link, setLink] = useState<string | null>(null);
  const queryClient = useQueryClient();
  const q = useQuery({
    queryKey: ["invites"],
    queryFn: ({ signal }) => uiFetch<InviteDto[]>("/api/ui/team/invites", { signal }),
    initialData: initial,
  });
  const create = useMutation({
    mutationFn: () => uiFetch<{ invite: InviteDto; url: string }>("/api/ui/team/invites", { body: { role } }),
    onSuccess: (r) => {
      setLink(r.url);
      queryClient.invalidateQueries({ queryKey: ["invites"] });
    },
  });
  const revoke = useMutation({
    mutationFn: (id: string) => uiFetch(`/api/ui/team/invites/${encodeURIComponent(id)}`, { method: "DELETE" }),
    onSettled: () => queryClient.invalidateQueries({ queryKey: ["invites"] }),
  });
  return (
    <section aria-labelledby="invites-heading" className="mt-10 space-y-4">
      <div>
        <h2 id="invites-heading" className="text-base font-semibold">
          Invite people
        </h2>
        <p className="mt-1 text-sm text-zinc-500 dark:text-zinc-400">
          An invite link lets one person join the team, signed in to their account or after creating one. It works once,
          for 7 days, and is shown only when it is made.
        </p>
      </div>
      <div className="flex flex-wrap items-center gap-2">
        <Select
          aria-label="Role of the invited person"
          value={role}
          onChange={(e) => setRole(e.target.value as TeamRole)}
          className="w-40"
        >
          <option value="member">As member</option>
          <option value="owner">As owner</option>
        </Select>
        <Button onClick={() => create.mutate()} disabled={create.isPending}>
          {create.isPending ? "Creating…" : "Create invite link"}
        </Button>
      </div>
      {create.error ? <ErrorBanner message={create.error.message} /> : null}
      {link ? (
        <div className="space-y-2 rounded-md border border-amber-200 bg-amber-50 p-3 text-sm text-amber-900 dark:border-amber-900/60 dark:bg-amber-950/40 dark:text-amber-200">
          <p role="alert">Send this link to the person you invite. It is not shown again.</p>
          <div className="flex items-center gap-2">
            <code
              data-testid="invite-link"
              className="min-w-0 flex-1 break-all rounded-md bg-white px-3 py-2 font-mono text-xs text-zinc-900 dark:bg-zinc-900 dark:text-zinc-100"
            >
              {link}
            </code>
            <CopyButton text={link} label="Copy link" />
          </div>
        </div>
      ) : null}
      {q.isError ? <ErrorBanner message={q.error.message} onRetry={() => q.refetch()} /> : null}
      {revoke.error ? <ErrorBanner message={revoke.error.message} /> : null}
      {q.data && q.data.length > 0 ? (
        <DataTable testId="invites-table" columns={columns}>
          {q.data.map((i) => (
            <tr key={i.id} data-invite-id={i.id}>
              <td className="px-4 py-3">
                <Badge tone={i.role === "owner" ? "indigo" : "neutral"}>
                  {i.role === "owner" ? "Owner" : "Member"}
                </Badge>
              </td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">{i.createdBy ?? "—"}</td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                <Time iso={i.createdAt} />
              </td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                <Time iso={i.expiresAt} />
              </td>
              <td className="px-4 py-3 text-right">
                <Button
                  variant="danger-ghost"
                  size="sm"
                  disabled={revoke.isPending}
                  aria-label={`Revoke the invite made ${i.createdAt.slice(0, 16).replace("T", " ")} UTC`}
                  onClick={() => revoke.mutate(i.id)}
                >
                  Revoke
                </Button>
              </td>
            </tr>
          ))}
        </DataTable>
      ) : (
        <p className="text-sm text-zinc-500 dark:text-zinc-400">No invite links waiting to be used.</p>
      )}
    </section>
  );
}
