/** The whole rows of a COPY chunk: row i is `data[bounds[2i], bounds[2i+1])`, its newline excluded. */
export type CopyRows = { data: Buffer; bounds: number[] };

/**
 * Rows out of the unescaped chunks of a dataset COPY (lib/services/dataset-jobs.ts): each row
 * ends with `\n` and its fields are separated by `\t`; neither occurs inside a field (they are
 * JSON text, ids and digits), so a row may be cut anywhere between two chunks. Rows come as
 * offsets into the chunk, not as buffers of their own: packaging reads millions of them.
 */
export function rowSplitter(): (chunk: Buffer) => CopyRows {
  let pending: Buffer | undefined;
  return (chunk) => {
    const data = pending ? Buffer.concat([pending, chunk]) : chunk;
    const bounds: number[] = [];
    let start = 0;
    for (let end = data.indexOf(0x0a); end !== -1; end = data.indexOf(0x0a, start)) {
      bounds.push(start, end);
      start = end + 1;
    }
    pending = start < data.length ? data.subarray(start) : undefined;
    return { data, bounds };
  };
}
