import type { Metadata } from "next";
import { InvitesPanel } from "@/components/members/invites-panel";
import { MembersTable } from "@/components/members/members-table";
import { PageHeader } from "@/components/ui/page-header";
import { requireTeamContext } from "@/lib/auth/session";
import { getDb } from "@/lib/db/client";
import { listInvites, listMembers } from "@/lib/services/members";

export const metadata: Metadata = { title: "Members · LM Platform" };

export default async function MembersPage() {
  const { team, user } = await requireTeamContext("/settings/members");
  const db = getDb().db;
  const isOwner = team.role === "owner";
  const [members, invites] = await Promise.all([
    listMembers(db, team.id, user.id),
    isOwner ? listInvites(db, team.id) : Promise.resolve([]),
  ]);
  return (
    <>
      <PageHeader
        title="Members"
        description={
          isOwner
            ? `People in the ${team.name} team. Owners invite, remove and change roles; members use everything else.`
            : `People in the ${team.name} team. Owners invite people and change roles.`
        }
      />
      <MembersTable initial={members} isOwner={isOwner} teamName={team.name} />
      {isOwner ? <InvitesPanel initial={invites} /> : null}
    </>
  );
}
