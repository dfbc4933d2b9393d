// What went wrong, for health answers and logs. drizzle wraps every failure as "Failed query:
// <sql> params: <values>" with the driver's error as its `cause`: the SQL says nothing of why
// (refused connection, wrong password, too many clients), and the values are user content
// (search terms, metadata, labels) or secrets (a password hash).

/** The innermost cause of `err` (its `cause` chain followed, at most 10 deep). */
function innermost(err: Error): Error {
  let e: Error = err;
  for (let i = 0; i < 10 && e.cause instanceof Error; i++) e = e.cause;
  return e;
}

/** The reason, with its code: `connect ECONNREFUSED 127.0.0.1:5432 (ECONNREFUSED)`. */
export function errorCause(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  let e = innermost(err);
  // Node's connection errors to several addresses: an AggregateError without a message.
  if (!e.message && e instanceof AggregateError && e.errors[0] instanceof Error) e = e.errors[0] as Error;
  const code = (e as { code?: unknown }).code;
  const message = e.message || e.name;
  return code !== undefined && !message.includes(String(code)) ? `${message} (${String(code)})` : message;
}

/** An error as a log line carries it: the reason and the innermost stack, the SQL without its values. */
export function loggableError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const inner = innermost(err);
  const query = (err as { query?: unknown }).query;
  return {
    type: inner.name,
    message: errorCause(err),
    stack: inner.stack,
    ...(typeof query === "string" ? { query } : {}),
  };
}
