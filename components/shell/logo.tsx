export function Logo() {
  return (
    <span className="inline-flex items-center gap-2 text-sm font-semibold tracking-tight">
      <span
        aria-hidden
        className="grid size-7 place-items-center rounded-md bg-indigo-600 text-[11px] font-bold text-white shadow-sm"
      >
        LM
      </span>
      LM Platform
    </span>
  );
}
