"use client";

import { signOut } from "next-auth/react";
import { Button } from "../ui/button";

export function UserMenu({ email, name }: { email: string; name: string | null }) {
  return (
    <div className="flex items-center justify-between gap-2 px-2.5">
      <div className="min-w-0 text-sm">
        {name ? <div className="truncate font-medium">{name}</div> : null}
        <div className="truncate text-xs text-zinc-500 dark:text-zinc-400" data-testid="user-email">
          {email}
        </div>
      </div>
      <Button variant="ghost" size="sm" onClick={() => signOut({ callbackUrl: "/sign-in" })}>
        Sign out
      </Button>
    </div>
  );
}
