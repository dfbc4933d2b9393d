"use client";

import { useState } from "react";
import { Input } from "../ui/field";

const labelClass = "mb-1 block text-xs font-medium text-zinc-600 dark:text-zinc-400";

/** An input applied on Enter or blur; follows the URL when it changes (back, clear). */
export function TextFilter({
  id,
  label,
  value,
  onApply,
  className,
  ...rest
}: {
  id: string;
  label: string;
  value: string;
  onApply: (raw: string) => void;
  className: string;
  type?: string;
  placeholder?: string;
  disabled?: boolean;
}) {
  const [text, setText] = useState(value);
  const [seen, setSeen] = useState(value);
  if (seen !== value) {
    setSeen(value);
    setText(value);
  }
  return (
    <div className={className}>
      <label htmlFor={id} className={labelClass}>
        {label}
      </label>
      <Input
        id={id}
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter") onApply(text.trim());
        }}
        onBlur={() => onApply(text.trim())}
        {...rest}
      />
    </div>
  );
}
