import type { Services } from "../../src/services.ts";

/** Resolves when `services` has kept the files of a run: the keeper's own notice, no polling. */
export function artifactsSaved(services: Services): (runId: string) => Promise<void> {
  const saved = new Set<string>();
  const waiting = new Map<string, () => void>();
  services.artifacts.keeper.onSaved((runId) => {
    saved.add(runId);
    waiting.get(runId)?.();
  });
  return (runId) =>
    saved.has(runId)
      ? Promise.resolve()
      : new Promise<void>((resolve) => waiting.set(runId, resolve));
}

/** Two script nodes writing into the run's shared directory, `a` then `b`. */
export const WRITERS = {
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "a",
      type: "script",
      config: {
        code: [
          "import os",
          "def main(p):",
          "    open('report.csv', 'w').write('id,total\\n1,42\\n')",
          "    os.makedirs('sub', exist_ok=True)",
          "    open('sub/data.json', 'w').write('{\"ok\": true}')",
          "    open('big.bin', 'wb').write(b'x' * 3000)",
          "    os.symlink('/etc/shadow', 'shadow')",
          "    os.mkfifo('pipe')",
          "    return 'a'",
          "",
        ].join("\n"),
      },
    },
    {
      id: "b",
      type: "script",
      config: {
        code: [
          "def main(p):",
          "    open('b.txt', 'w').write('written by b')",
          "    open('page.html', 'w').write('<script>alert(1)</script>')",
          "    return 'b'",
          "",
        ].join("\n"),
      },
    },
  ],
  edges: [
    { source: "in", target: "a" },
    { source: "a", target: "b" },
  ],
};
