"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useState } from "react";
import type { MemberDto, TeamRole } from "@/lib/contracts/members";
import { uiFetch } from "../api-client";
import { Badge } from "../ui/badge";
import { Button } from "../ui/button";
import { ConfirmDialog } from "../ui/confirm-dialog";
import { Select } from "../ui/field";
import { ErrorBanner, RefreshError } from "../ui/states";
import { DataTable, type Column } from "../ui/table";
import { Time } from "../ui/time";

const columns: Column[] = [
  { label: "Member" },
  { label: "Role" },
  { label: "Joined" },
  { label: "Actions", srOnly: true },
];

/**
 * The team's members. Owners change roles and remove members; everyone may leave (and is then
 * sent to their next team). The server keeps the last owner: its 409 is shown as it says.
 */
export function MembersTable({
  initial,
  isOwner,
  teamName,
}: {
  initial: MemberDto[];
  isOwner: boolean;
  teamName: string;
}) {
  const [removing, setRemoving] = useState<MemberDto | null>(null);
  const [revokeKeys, setRevokeKeys] = useState(true);
  const router = useRouter();
  const queryClient = useQueryClient();
  const q = useQuery({
    queryKey: ["members"],
    queryFn: ({ signal }) => uiFetch<MemberDto[]>("/api/ui/team/members", { signal }),
    initialData: initial,
  });
  const setRole = useMutation({
    mutationFn: (v: { userId: string; role: TeamRole }) =>
      uiFetch(`/api/ui/team/members/${encodeURIComponent(v.userId)}`, { method: "PATCH", body: { role: v.role } }),
    // Shown at once; the list is read again either way (a refusal, the last owner's, puts it back).
    onMutate: (v) =>
      queryClient.setQueryData<MemberDto[]>(["members"], (list) =>
        list?.map((m) => (m.userId === v.userId ? { ...m, role: v.role } : m)),
      ),
    onSettled: () => queryClient.invalidateQueries({ queryKey: ["members"] }),
    // A demoted owner loses their invite links and API keys; demoting yourself also takes this
    // page's owner controls away (isOwner comes from the server's render).
    onSuccess: (_, v) => {
      queryClient.invalidateQueries({ queryKey: ["invites"] });
      queryClient.invalidateQueries({ queryKey: ["keys"] });
      if (v.role !== "owner" && q.data.some((m) => m.you && m.userId === v.userId)) router.refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (m: MemberDto) =>
      uiFetch(`/api/ui/team/members/${encodeURIComponent(m.userId)}?revokeKeys=${isOwner && revokeKeys}`, {
        method: "DELETE",
      }),
    onSuccess: (_, m) => {
      setRemoving(null);
      if (m.you) {
        // Out of this team: every cached page of it is stale.
        queryClient.clear();
        router.push("/pipelines");
        router.refresh();
      } else {
        queryClient.invalidateQueries({ queryKey: ["members"] });
        queryClient.invalidateQueries({ queryKey: ["invites"] });
        queryClient.invalidateQueries({ queryKey: ["keys"] });
      }
    },
  });
  const stale = <RefreshError query={q} />;
  // The last owner can neither leave nor be removed (the server says so too): no button for it.
  const owners = q.data.filter((m) => m.role === "owner").length;
  return (
    <>
      {stale}
      <>
        {setRole.error ? <ErrorBanner message={setRole.error.message} /> : null}
        {isOwner ? (
          <p className="mb-3 text-sm text-zinc-500 dark:text-zinc-400">
            An owner made a member loses the invite links and the API keys they made: an API key can do whatever an
            owner can, and members cannot hold one.
          </p>
        ) : null}
        <DataTable testId="members-table" columns={columns}>
          {q.data.map((m) => (
            <tr key={m.userId} data-member={m.email}>
              <td className="px-4 py-3">
                <span className="font-medium">{m.name ?? m.email}</span>
                {m.you ? <span className="ml-2 text-xs text-zinc-500 dark:text-zinc-400">(you)</span> : null}
                {m.name ? <span className="block text-xs text-zinc-500 dark:text-zinc-400">{m.email}</span> : null}
              </td>
              <td className="px-4 py-3">
                {isOwner ? (
                  <Select
                    aria-label={`Role of ${m.email}`}
                    value={m.role}
                    disabled={setRole.isPending}
                    onChange={(e) => setRole.mutate({ userId: m.userId, role: e.target.value as TeamRole })}
                    className="w-32"
                  >
                    <option value="owner">Owner</option>
                    <option value="member">Member</option>
                  </Select>
                ) : (
                  <Badge tone={m.role === "owner" ? "indigo" : "neutral"}>
                    {m.role === "owner" ? "Owner" : "Member"}
                  </Badge>
                )}
              </td>
              <td className="px-4 py-3 text-zinc-600 dark:text-zinc-400">
                <Time iso={m.joinedAt} />
              </td>
              <td className="px-4 py-3 text-right">
                {(m.you || isOwner) && !(m.role === "owner" && owners === 1) ? (
                  <Button
                    variant="danger-ghost"
                    size="sm"
                    aria-label={m.you ? "Leave the team" : `Remove ${m.email}`}
                    onClick={() => setRemoving(m)}
                  >
                    {m.you ? "Leave" : "Remove"}
                  </Button>
                ) : null}
              </td>
            </tr>
          ))}
        </DataTable>
        <ConfirmDialog
          open={removing !== null}
          onClose={() => {
            setRemoving(null);
            setRevokeKeys(true);
            remove.reset();
          }}
          title={removing?.you ? `Leave ${teamName}?` : "Remove this member?"}
          description={
            removing?.you ? (
              <>
                You lose access to the team&apos;s pipelines, datasets and deployments at once. An owner can invite you
                back.
              </>
            ) : (
              <>
                <span className="font-medium">{removing?.email}</span> loses access to the team at once, and their
                running playground streams end.
              </>
            )
          }
          testId="remove-member-dialog"
          confirmLabel={removing?.you ? "Leave team" : "Remove member"}
          pendingLabel={removing?.you ? "Leaving…" : "Removing…"}
          pending={remove.isPending}
          error={remove.error}
          onConfirm={() => removing && remove.mutate(removing)}
        >
          {removing && isOwner ? (
            <label className="mb-3 flex items-start gap-2 text-sm">
              <input
                type="checkbox"
                checked={revokeKeys}
                onChange={(e) => setRevokeKeys(e.target.checked)}
                className="mt-0.5 accent-indigo-600"
              />
              <span>
                Also revoke the keys {removing.you ? "you" : "they"} made
                {removing.keys > 0 ? ` (${removing.keys} valid now)` : ""}: requests made with them get 401 at once.
                Otherwise their model keys stay (they belong to the team); API keys go in any case.
              </span>
            </label>
          ) : null}
        </ConfirmDialog>
      </>
    </>
  );
}
