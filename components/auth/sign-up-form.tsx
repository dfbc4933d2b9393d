"use client";

import { signIn } from "next-auth/react";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { SignUpBody } from "@/lib/contracts/users";
import { safeCallback } from "@/lib/ui/safe-callback";
import { uiFetch, UiError } from "../api-client";
import { Button } from "../ui/button";
import { Field, Input } from "../ui/field";
import { serverFieldError } from "@/lib/ui/field-error";
import { fieldErrors } from "../ui/form-errors";
import { ErrorBanner } from "../ui/states";

/**
 * Sign-up validates with the server's own schema, then signs the new user in and goes to
 * `callbackUrl` (a path of this site: an invite link, for one) or the pipelines.
 */
export function SignUpForm({ callbackUrl, invite }: { callbackUrl?: string; invite?: string }) {
  const router = useRouter();
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [pending, setPending] = useState(false);
  const invalid = (name: string) => (errors[name] ? { "aria-invalid": true, "aria-describedby": `${name}-error` } : {});
  return (
    <form
      aria-label="Create account"
      noValidate
      className="space-y-4"
      onSubmit={async (e) => {
        e.preventDefault();
        const data = Object.fromEntries(new FormData(e.currentTarget)) as Record<string, string>;
        const input = {
          email: data.email,
          password: data.password,
          name: data.name || undefined,
          teamName: data.teamName || undefined,
          ...(invite ? { invite } : {}),
        };
        const parsed = SignUpBody.safeParse(input);
        if (!parsed.success) return setErrors(fieldErrors(parsed.error));
        setErrors({});
        setPending(true);
        try {
          await uiFetch("/api/ui/sign-up", { body: input });
          const res = await signIn("credentials", { email: input.email, password: input.password, redirect: false });
          if (!res?.ok || res.error) throw new UiError("Your account was created, but signing in failed.", 500);
          router.push(safeCallback(callbackUrl));
          router.refresh();
        } catch (err) {
          setPending(false);
          const ui = err instanceof UiError ? err : new UiError("Sign-up failed. Try again.", 500);
          const message = ui.message.replace(/^Invalid '[^']+': /, "");
          setErrors(serverFieldError({ message, param: ui.param }, ["email", "password", "name", "teamName"]));
        }
      }}
    >
      {errors.form ? <ErrorBanner message={errors.form} /> : null}
      <Field id="name" label="Your name" error={errors.name}>
        <Input id="name" name="name" autoComplete="name" {...invalid("name")} />
      </Field>
      <Field id="email" label="Email" error={errors.email}>
        <Input id="email" name="email" type="email" autoComplete="email" required {...invalid("email")} />
      </Field>
      <Field id="password" label="Password" error={errors.password} hint="At least 8 characters.">
        <Input
          id="password"
          name="password"
          type="password"
          autoComplete="new-password"
          required
          {...invalid("password")}
        />
      </Field>
      {invite ? null : (
        <Field
          id="teamName"
          label="Team name"
          error={errors.teamName}
          hint="Optional: defaults to the name in your email address."
        >
          <Input id="teamName" name="teamName" autoComplete="organization" {...invalid("teamName")} />
        </Field>
      )}
      <Button type="submit" className="w-full" disabled={pending}>
        {pending ? "Creating account…" : "Create account"}
      </Button>
      <p className="text-center text-sm text-zinc-500 dark:text-zinc-400">
        Already have an account?{" "}
        <Link
          href={callbackUrl ? `/sign-in?callbackUrl=${encodeURIComponent(callbackUrl)}` : "/sign-in"}
          className="font-medium text-indigo-600 hover:underline dark:text-indigo-400"
        >
          Sign in
        </Link>
      </p>
    </form>
  );
}
