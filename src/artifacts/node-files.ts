import { lstat } from "node:fs/promises";
import { walk } from "./walk.ts";

/**
 * Which script node of a run wrote which file: the nodes of a flow run share one working
 * directory, so after each node ends the directory is listed (lstat only, nothing read) and each
 * file that is new or changed since the previous listing is the node's. A file two nodes wrote
 * is the later one's. Only runs that keep their files pay for this.
 */
// Not the ctime: handing a kept directory to the next node's group (lchown) changes it.
export interface NodeFiles {
  afterNode(nodeId: string): Promise<void>;
  /** The node that last wrote `name`, null when no listing saw it change. */
  nodeOf(name: string): string | null;
}

export function trackNodeFiles(dir: string, budget: number): NodeFiles {
  let seen = new Map<string, string>();
  const owner = new Map<string, string>();
  return {
    async afterNode(nodeId) {
      const now = new Map<string, string>();
      try {
        await walk(dir, budget, async ({ name, full, dirent }) => {
          if (!dirent.isFile()) return;
          const st = await lstat(full).catch(() => undefined);
          if (st) now.set(name, `${st.ino}:${st.size}:${st.mtimeMs}`);
        });
      } catch {
        return; // no directory (yet): the node wrote nothing
      }
      for (const [name, sig] of now) if (seen.get(name) !== sig) owner.set(name, nodeId);
      seen = now;
    },
    nodeOf: (name) => owner.get(name) ?? null,
  };
}
