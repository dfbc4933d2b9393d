/**
 * Rows out of the unescaped chunks of a dataset COPY (lib/services/dataset-jobs.ts): each row
 * ends with `\n` and its fields are separated by `\t`; neither occurs inside a field (they are
 * JSON text, ids and digits), so a row may be cut anywhere between two chunks.
 */
export function rowSplitter(): (chunk: Buffer) => Buffer[][] {
  let pending: Buffer | undefined;
  return (chunk) => {
    const data = pending ? Buffer.concat([pending, chunk]) : chunk;
    const rows: Buffer[][] = [];
    let start = 0;
    for (let end = data.indexOf(0x0a); end !== -1; end = data.indexOf(0x0a, start)) {
      rows.push(fields(data, start, end));
      start = end + 1;
    }
    pending = start < data.length ? data.subarray(start) : undefined;
    return rows;
  };
}

function fields(data: Buffer, start: number, end: number): Buffer[] {
  const out: Buffer[] = [];
  for (let tab = data.indexOf(0x09, start); tab !== -1 && tab < end; tab = data.indexOf(0x09, start)) {
    out.push(data.subarray(start, tab));
    start = tab + 1;
  }
  out.push(data.subarray(start, end));
  return out;
}
