/** A JSON Schema (draft 2020-12, as OpenAPI 3.1 uses), as far as the reference shows it. */
export type Schema = {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  description?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  format?: string;
  additionalProperties?: Schema | boolean;
};

const MAX_DEPTH = 6;

/** A schema as a nested list of fields: name, type, constraints and description. */
export function SchemaView({
  schema,
  components,
  depth = 0,
}: {
  schema: Schema;
  components: Record<string, Schema>;
  depth?: number;
}) {
  const s = resolve(schema, components);
  if (depth > MAX_DEPTH) return <span className="text-xs text-zinc-500">…</span>;
  if (s.properties) {
    return (
      <ul className="mt-1 space-y-1 border-l border-zinc-200 pl-3 dark:border-zinc-700">
        {Object.entries(s.properties).map(([name, p]) => (
          <li key={name} className="text-xs">
            <code className="font-mono font-semibold">{name}</code>{" "}
            <span className="text-zinc-500">
              {typeOf(p, components)}
              {s.required?.includes(name) ? ", required" : ""}
              {constraints(resolve(p, components))}
            </span>
            {resolve(p, components).description ? (
              <span className="text-zinc-500"> — {resolve(p, components).description}</span>
            ) : null}
            {hasChildren(p, components) ? (
              <SchemaView schema={childOf(p, components)} components={components} depth={depth + 1} />
            ) : null}
          </li>
        ))}
      </ul>
    );
  }
  const variants = s.oneOf ?? s.anyOf;
  if (variants) {
    return (
      <ul className="mt-1 space-y-1 border-l border-dashed border-zinc-300 pl-3 dark:border-zinc-700">
        {variants.map((v, i) => (
          <li key={i} className="text-xs">
            <span className="text-zinc-500">one of: {typeOf(v, components)}</span>
            {hasChildren(v, components) ? <SchemaView schema={v} components={components} depth={depth + 1} /> : null}
          </li>
        ))}
      </ul>
    );
  }
  if (s.items) return <SchemaView schema={s.items} components={components} depth={depth + 1} />;
  return <span className="text-xs text-zinc-500">{typeOf(s, components)}</span>;
}

function resolve(s: Schema, components: Record<string, Schema>): Schema {
  const name = s.$ref?.replace("#/components/schemas/", "");
  return name && components[name] ? components[name]! : s;
}

function typeOf(schema: Schema, components: Record<string, Schema>): string {
  const s = resolve(schema, components);
  const ref = schema.$ref ? schema.$ref.split("/").pop() : undefined;
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((e) => JSON.stringify(e)).join(" | ");
  if (s.type === "array" && s.items) return `array of ${typeOf(s.items, components)}`;
  const base = Array.isArray(s.type) ? s.type.join(" | ") : (s.type ?? (s.oneOf || s.anyOf ? "one of" : "any"));
  return ref ? `${ref} (${base})` : s.format ? `${base} (${s.format})` : base;
}

function constraints(s: Schema): string {
  const parts = [
    s.minLength !== undefined && `≥ ${s.minLength} chars`,
    s.maxLength !== undefined && `≤ ${s.maxLength} chars`,
    s.minimum !== undefined && `≥ ${s.minimum}`,
    s.maximum !== undefined && `≤ ${s.maximum}`,
    s.minItems !== undefined && `≥ ${s.minItems} items`,
    s.maxItems !== undefined && `≤ ${s.maxItems} items`,
  ].filter(Boolean);
  return parts.length > 0 ? `, ${parts.join(", ")}` : "";
}

function childOf(p: Schema, components: Record<string, Schema>): Schema {
  const s = resolve(p, components);
  return s.type === "array" && s.items ? s.items : s;
}

function hasChildren(p: Schema, components: Record<string, Schema>): boolean {
  const c = resolve(childOf(p, components), components);
  return !!(c.properties || c.oneOf || c.anyOf);
}
