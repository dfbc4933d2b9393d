"use client";

import { signOut } from "next-auth/react";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { Button } from "../ui/button";

/**
 * Signs out, then goes to the sign-in page of the host the dashboard was opened on (next-auth's
 * own redirect would go to PUBLIC_URL's host: `localhost` by default, refused on a teammate's
 * machine).
 */
export function SignOutButton({ variant = "secondary", size }: { variant?: "secondary" | "ghost"; size?: "sm" }) {
  const router = useRouter();
  const [pending, setPending] = useState(false);
  return (
    <Button
      variant={variant}
      size={size}
      disabled={pending}
      onClick={async () => {
        setPending(true);
        try {
          await signOut({ redirect: false });
        } catch {
          // Signed out or not, the sign-in page says which (a session still valid goes on from there).
        } finally {
          setPending(false);
          router.push("/sign-in");
          router.refresh();
        }
      }}
    >
      Sign out
    </Button>
  );
}
