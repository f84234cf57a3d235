import { realpath, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * Writes `file` (an `-o`/`--out` of the CLI) whole or not at all (docs/cli.md, "Output files"):
 * into `.<name>.sluice-part` beside it, then renamed over it in one step. A command killed while
 * it writes leaves the file it had before as it was; the next write of the same file reuses that
 * name, so a killed one's part does not stay for good. A link is written through, as before.
 */
export async function writeWhole(file: string, data: string | Uint8Array): Promise<void> {
  const target = await realpath(file).catch(() => file);
  const part = path.join(path.dirname(target), `.${path.basename(target)}.sluice-part`);
  try {
    await writeFile(part, data);
    await rename(part, target);
  } catch (err) {
    await rm(part, { force: true });
    throw err;
  }
}
