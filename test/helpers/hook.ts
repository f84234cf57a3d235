import http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A webhook receiver for tests: counts the calls of each path; `/flaky` answers 500 until
 * `healFlaky()`; `/hang` answers only when `release()` is called. Calls are counted as they arrive.
 */
export interface Hook {
  url: string;
  calls(path: string): number;
  /** Resolves once `path` has been called `n` times. */
  reached(path: string, n: number): Promise<void>;
  healFlaky(): void;
  release(): void;
  close(): Promise<void>;
}

export async function startHook(): Promise<Hook> {
  const counts = new Map<string, number>();
  let flakyOk = false;
  const hanging: http.ServerResponse[] = [];
  const waiters: { path: string; n: number; resolve: () => void }[] = [];
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    counts.set(path, (counts.get(path) ?? 0) + 1);
    for (const w of waiters.filter((x) => x.path === path && (counts.get(path) ?? 0) >= x.n)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
    req.resume();
    req.on("end", () => {
      res.setHeader("content-type", "application/json");
      if (path === "/hang") {
        hanging.push(res);
        return;
      }
      if (path === "/flaky" && !flakyOk) {
        res.statusCode = 500;
        res.end(JSON.stringify({ error: "not yet" }));
        return;
      }
      res.end(JSON.stringify({ path, n: counts.get(path) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    calls: (path) => counts.get(path) ?? 0,
    reached: (path, n) =>
      (counts.get(path) ?? 0) >= n
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiters.push({ path, n, resolve })),
    healFlaky: () => {
      flakyOk = true;
    },
    release: () => {
      for (const res of hanging.splice(0)) res.end("{}");
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging.splice(0)) res.end("{}");
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
