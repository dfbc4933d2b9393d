import { request } from "node:http";

/**
 * `count` chunked POSTs of a JSON body to `url`, sent as far as `head` and held open there (no
 * Content-Length: each counts as its route's whole body limit until parsed). `finish(rest)` sends
 * the rest of each; `answered` resolves to their statuses (0 for a connection that failed).
 */
export function holdUploads(url: string, headers: Record<string, string>, count: number, head: string) {
  const answered: Promise<number>[] = [];
  const uploads = Array.from({ length: count }, () => {
    const req = request(url, { method: "POST", headers: { "content-type": "application/json", ...headers } });
    answered.push(
      new Promise((resolve) => {
        req.on("response", (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on("error", () => resolve(0));
      }),
    );
    req.write(head);
    return req;
  });
  return {
    finish: (rest: string) => {
      for (const req of uploads) req.end(rest);
    },
    answered: () => Promise.all(answered),
  };
}
