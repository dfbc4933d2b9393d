"use client";

import { signOut } from "next-auth/react";
import { Button } from "../ui/button";

export function SignOutButton({ variant = "secondary", size }: { variant?: "secondary" | "ghost"; size?: "sm" }) {
  return (
    <Button variant={variant} size={size} onClick={() => signOut({ callbackUrl: "/sign-in" })}>
      Sign out
    </Button>
  );
}
