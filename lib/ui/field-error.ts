/**
 * A server's refusal shown where the form can show it: under the field its `param` names (by its
 * top-level name: `upstream.urls[0]` is the `upstream` field), else above the form. A param no
 * field shows would otherwise be stored under a key nothing renders, and the refusal lost.
 */
export function serverFieldError(
  err: { message: string; param?: string },
  fields: readonly string[],
): Record<string, string> {
  const top = err.param?.split(/[.[]/)[0];
  return top && fields.includes(top) ? { [top]: err.message } : { form: err.message };
}
