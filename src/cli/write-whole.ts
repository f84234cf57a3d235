import { realpath, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * Writes `file` (an `-o`/`--out` of the CLI) whole or not at all (docs/cli.md, "Output files"):
 * into `.<name>.sluice-part` beside it, then renamed over it in one step. A command killed while
 * it writes leaves the file it had before as it was; the next write of the same file removes that
 * part first, so a killed one's part does not stay for good. The part is created anew (never an
 * existing file or link under its name written through) with the permissions of the file it
 * replaces. A link at `file` is written through, as before.
 */
export async function writeWhole(file: string, data: string | Uint8Array): Promise<void> {
  const target = await realpath(file).catch(() => file);
  const part = path.join(path.dirname(target), `.${path.basename(target)}.sluice-part`);
  const mode = await stat(target).then(
    (st) => st.mode & 0o777,
    () => 0o666,
  );
  try {
    await rm(part, { force: true });
    await writeFile(part, data, { flag: "wx", mode });
    await rename(part, target);
  } catch (err) {
    // Not a part someone else created between the removal and this one's creation.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") await rm(part, { force: true });
    throw err;
  }
}
