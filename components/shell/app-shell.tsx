import type { ReactNode } from "react";
import { Logo } from "./logo";
import { NavLinks } from "./nav-links";
import { TeamSwitcher } from "./team-switcher";
import { UserMenu } from "./user-menu";

type Props = {
  user: { email: string; name: string | null };
  team: { id: string; name: string; slug: string };
  teams: { id: string; name: string; slug: string }[];
  children: ReactNode;
};

/** Sidebar (team, navigation, user) and the page area. */
export function AppShell({ user, team, teams, children }: Props) {
  return (
    <div className="flex min-h-screen">
      <a
        href="#main"
        className="sr-only focus:not-sr-only focus:absolute focus:left-2 focus:top-2 focus:z-50 focus:rounded focus:bg-white focus:px-3 focus:py-2 focus:text-sm dark:focus:bg-zinc-900"
      >
        Skip to content
      </a>
      <aside className="sticky top-0 flex h-screen w-60 shrink-0 flex-col gap-6 border-r border-zinc-200 bg-zinc-50 px-3 py-5 dark:border-zinc-800 dark:bg-zinc-900/40">
        <div className="px-2.5">
          <Logo />
        </div>
        <TeamSwitcher teams={teams} currentId={team.id} />
        <NavLinks />
        <div className="mt-auto border-t border-zinc-200 pt-4 dark:border-zinc-800">
          <UserMenu email={user.email} name={user.name} />
        </div>
      </aside>
      <main id="main" className="min-w-0 flex-1 px-8 py-8">
        <div className="mx-auto max-w-6xl">{children}</div>
      </main>
    </div>
  );
}
