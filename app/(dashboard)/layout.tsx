import type { ReactNode } from "react";
import { AppShell } from "@/components/shell/app-shell";
import { Providers } from "@/components/shell/providers";
import { TeamSync } from "@/components/shell/page-team";
import { requireTeamContext } from "@/lib/auth/session";

// Every dashboard page needs a session (each page checks again: layouts do not re-run on navigation).
// The layout's redirect keeps the answer an HTTP 307; a page's, once the layout has streamed, is
// a 200 that redirects in the browser.
export default async function DashboardLayout({ children }: { children: ReactNode }) {
  const { user, team, teams } = await requireTeamContext();
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
