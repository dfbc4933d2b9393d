import type { ReactNode } from "react";
import { AppShell } from "@/components/shell/app-shell";
import { Providers } from "@/components/shell/providers";
import { TeamSync } from "@/components/shell/page-team";
import { currentTeamContext } from "@/lib/auth/session";

// Every dashboard page needs a session, and each page asks for it (layouts do not re-run on
// navigation): without one, the layout leaves the redirect to the page, which knows its own URL
// to come back to after signing in (a layout's redirect ran alongside it and went to /pipelines).
export default async function DashboardLayout({ children }: { children: ReactNode }) {
  const ctx = await currentTeamContext();
  if (!ctx) return children;
  const { user, team, teams } = ctx;
  const pick = (t: { id: string; name: string; slug: string }) => ({ id: t.id, name: t.name, slug: t.slug });
  return (
    // Keyed by team: switching teams starts with an empty client cache, never the other team's data.
    <Providers key={team.id}>
      {/* The team this page shows: the dashboard's requests send it (components/shell/page-team.ts). */}
      <meta name="lmp-team" content={team.id} />
      <TeamSync teamId={team.id} />
      <AppShell user={user} team={pick(team)} teams={teams.map(pick)}>
        {children}
      </AppShell>
    </Providers>
  );
}
