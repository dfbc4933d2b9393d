"use client";

import { SignOutButton } from "../auth/sign-out-button";

export function UserMenu({ email, name }: { email: string; name: string | null }) {
  return (
    <div className="flex items-center justify-between gap-2 px-2.5">
      <div className="min-w-0 text-sm">
        {name ? <div className="truncate font-medium">{name}</div> : null}
        <div className="truncate text-xs text-zinc-500 dark:text-zinc-400" data-testid="user-email">
          {email}
        </div>
      </div>
      <SignOutButton variant="ghost" size="sm" />
    </div>
  );
}
