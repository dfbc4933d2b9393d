"use client";

import Link from "next/link";
import { usePathname } from "next/navigation";
import { cx } from "../ui/cx";

const LINKS = [
  { href: "/pipelines", label: "Pipelines" },
  { href: "/datasets", label: "Datasets" },
  { href: "/deployments", label: "Deployments" },
  { href: "/playground", label: "Playground" },
  { href: "/usage", label: "Usage" },
  { href: "/settings/keys", label: "API keys" },
  { href: "/settings/members", label: "Members" },
  { href: "/api-reference", label: "API reference" },
];

export function NavLinks() {
  // Null only in the Pages Router, which serves no page of this app (just API routes).
  const pathname = usePathname() ?? "";
  return (
    <nav aria-label="Main" className="flex flex-col gap-0.5">
      {LINKS.map((l) => {
        const active = pathname === l.href || pathname.startsWith(l.href + "/");
        return (
          <Link
            key={l.href}
            href={l.href}
            aria-current={active ? "page" : undefined}
            className={cx(
              "rounded-md px-2.5 py-1.5 text-sm font-medium transition-colors",
              active
                ? "bg-zinc-200/70 text-zinc-900 dark:bg-zinc-800 dark:text-white"
                : "text-zinc-600 hover:bg-zinc-100 hover:text-zinc-900 dark:text-zinc-400 dark:hover:bg-zinc-800/60 dark:hover:text-zinc-100",
            )}
          >
            {l.label}
          </Link>
        );
      })}
    </nav>
  );
}
