import type { Dirent } from "node:fs";
import { opendir, realpath } from "node:fs/promises";
import path from "node:path";

/** Directories deeper than this below the working directory are not entered. */
export const MAX_DEPTH = 32;

export interface WalkEntry {
  /** Relative to the root, `/`-separated. */
  name: string;
  /** Host path. */
  full: string;
  dirent: Dirent;
}

/**
 * Every entry below `root` that is not a directory, visited once, directories entered only when
 * they are real directories (never through a symbolic link) and still where they were listed.
 * Stops after `budget` entries: a script may leave millions of files, and the walk must stay
 * bounded in time and memory. Answers whether it stopped early.
 */
export async function walk(
  root: string,
  budget: number,
  visit: (e: WalkEntry) => Promise<void> | void,
  onSkippedDir: (name: string, reason: string) => void = () => {},
): Promise<{ truncated: boolean; realRoot: string }> {
  const realRoot = await realpath(root);
  let left = budget;
  const enter = async (rel: string[], depth: number): Promise<boolean> => {
    const expected = path.join(realRoot, ...rel);
    // A directory swapped for a link to elsewhere since it was listed is not read.
    if (rel.length > 0 && (await realpath(expected).catch(() => "")) !== expected) {
      onSkippedDir(rel.join("/"), "moved while read");
      return true;
    }
    for await (const dirent of await opendir(expected)) {
      if (left-- <= 0) return false;
      const name = [...rel, dirent.name].join("/");
      if (!dirent.isDirectory()) {
        await visit({ name, full: path.join(expected, dirent.name), dirent });
        continue;
      }
      if (depth >= MAX_DEPTH) onSkippedDir(name, `deeper than ${MAX_DEPTH} directories`);
      else if (!(await enter([...rel, dirent.name], depth + 1))) return false;
    }
    return true;
  };
  const complete = await enter([], 0);
  return { truncated: !complete, realRoot };
}
