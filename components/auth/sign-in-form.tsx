"use client";

import { signIn } from "next-auth/react";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { Button } from "../ui/button";
import { Field, Input } from "../ui/field";
import { ErrorBanner } from "../ui/states";
import { safeCallback } from "@/lib/ui/safe-callback";

export function SignInForm({
  callbackUrl,
  notice,
  signUpOpen = true,
}: {
  callbackUrl?: string;
  notice?: string;
  /** False when accounts are made with invite links only (SIGN_UP=invite): no "Create an account". */
  signUpOpen?: boolean;
}) {
  const router = useRouter();
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);
  return (
    <form
      aria-label="Sign in"
      className="space-y-4"
      onSubmit={async (e) => {
        e.preventDefault();
        const data = new FormData(e.currentTarget);
        setPending(true);
        setError(null);
        const res = await signIn("credentials", {
          email: String(data.get("email") ?? ""),
          password: String(data.get("password") ?? ""),
          redirect: false,
        });
        if (res?.ok && !res.error) {
          router.push(safeCallback(callbackUrl));
          router.refresh();
          return;
        }
        setPending(false);
        setError(
          res?.error === "CredentialsSignin"
            ? "Wrong email or password."
            : res?.error?.startsWith("Too many sign-in attempts")
              ? res.error
              : "Sign-in failed. Try again.",
        );
      }}
    >
      {notice ? (
        <p className="rounded-md bg-emerald-50 px-3 py-2 text-sm text-emerald-800 dark:bg-emerald-950/50 dark:text-emerald-300">
          {notice}
        </p>
      ) : null}
      {error ? <ErrorBanner message={error} /> : null}
      <Field id="email" label="Email">
        <Input id="email" name="email" type="email" autoComplete="email" required autoFocus />
      </Field>
      <Field id="password" label="Password">
        <Input id="password" name="password" type="password" autoComplete="current-password" required />
      </Field>
      <Button type="submit" className="w-full" disabled={pending}>
        {pending ? "Signing in…" : "Sign in"}
      </Button>
      {signUpOpen ? (
        <p className="text-center text-sm text-zinc-500 dark:text-zinc-400">
          New here?{" "}
          <Link
            href={callbackUrl ? `/sign-up?callbackUrl=${encodeURIComponent(callbackUrl)}` : "/sign-up"}
            className="font-medium text-indigo-600 hover:underline dark:text-indigo-400"
          >
            Create an account
          </Link>
        </p>
      ) : (
        <p className="text-center text-sm text-zinc-500 dark:text-zinc-400">
          New here? Ask a team owner for an invite link.
        </p>
      )}
    </form>
  );
}
