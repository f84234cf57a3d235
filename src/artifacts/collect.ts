import { createHash } from "node:crypto";
import { constants, type Stats } from "node:fs";
import { type FileHandle, open, readlink, realpath } from "node:fs/promises";
import path from "node:path";
import { contentTypeOf } from "./content-type.ts";
import { nameProblem, shownName } from "./names.ts";
import { type WalkEntry, walk } from "./walk.ts";

/** ARTIFACT_MAX_FILE_BYTES, ARTIFACT_MAX_RUN_BYTES, ARTIFACT_MAX_FILES (docs/artifacts.md). */
export interface ArtifactLimits {
  maxFileBytes: number;
  maxRunBytes: number;
  maxFiles: number;
}

export interface FoundFile {
  name: string;
  size: number;
  contentType: string;
  sha256: string;
  bytes: Buffer;
}

export interface SkippedFile {
  name: string;
  reason: string;
  size?: number | undefined;
}

export interface Collected {
  files: number;
  bytes: number;
  /** At most MAX_SKIPPED_LISTED; `skippedMore` counts the rest. */
  skipped: SkippedFile[];
  skippedMore: number;
}

export const MAX_SKIPPED_LISTED = 100;

/**
 * The files of a run's working directory, read as the root-owned service reads a directory its
 * scripts could write (docs/artifacts.md, "Hostile files"): regular files only, each opened with
 * O_NOFOLLOW | O_NONBLOCK (a link is refused, a FIFO does not block), checked with fstat on the
 * opened descriptor (what is read is what was checked), hard links refused, the descriptor's real
 * path checked to be inside the directory, and read no further than the limits. Each kept file
 * is handed to `keep` in turn, so one file's bytes at most are in memory.
 */
export async function collectFiles(
  dir: string,
  limits: ArtifactLimits,
  keep: (file: FoundFile) => Promise<void>,
): Promise<Collected> {
  const out: Collected = { files: 0, bytes: 0, skipped: [], skippedMore: 0 };
  const skip = (s: SkippedFile) => {
    if (out.skipped.length < MAX_SKIPPED_LISTED)
      out.skipped.push({ ...s, name: shownName(s.name) });
    else out.skippedMore++;
  };
  // The walk itself is bounded too: past the file limit, a few more entries are looked at so
  // that the listing says what was left out, then it stops.
  const budget = limits.maxFiles + MAX_SKIPPED_LISTED + 1;
  const realRoot = await realpath(dir);
  const visit = async ({ name, dirent }: WalkEntry) => {
    const problem = nameProblem(name);
    if (problem) return skip({ name, reason: `name ${problem}` });
    if (dirent.isSymbolicLink()) return skip({ name, reason: "symbolic link" });
    if (!dirent.isFile()) return skip({ name, reason: "not a regular file" });
    if (out.files >= limits.maxFiles)
      return skip({ name, reason: `over ARTIFACT_MAX_FILES (${limits.maxFiles})` });
    const got = await readBounded(path.join(realRoot, ...name.split("/")), {
      maxFileBytes: limits.maxFileBytes,
      runBytesLeft: limits.maxRunBytes - out.bytes,
    });
    if (!Buffer.isBuffer(got)) return skip({ name, ...got });
    await keep({
      name,
      size: got.length,
      contentType: contentTypeOf(name),
      sha256: createHash("sha256").update(got).digest("hex"),
      bytes: got,
    });
    out.files++;
    out.bytes += got.length;
  };
  const { truncated } = await walk(realRoot, budget, visit, (name, reason) =>
    skip({ name, reason }),
  );
  if (truncated) skip({ name: "", reason: "the directory holds more entries than were read" });
  return out;
}

const OPEN_FLAGS =
  constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

type Refusal = { reason: string; size?: number };

/**
 * The bytes of the regular file at `full` (a path inside the real root), or why not. It does not
 * trust the walk's view of the entry: between the listing and the open a script still running
 * could have swapped the file for a link, a FIFO or a hard link.
 */
export async function readBounded(
  full: string,
  lim: { maxFileBytes: number; runBytesLeft: number },
): Promise<Buffer | Refusal> {
  let fh: FileHandle;
  try {
    fh = await open(full, OPEN_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // ELOOP: it became a link; ENXIO: a socket (or a FIFO without a writer on some systems).
    if (code === "ELOOP") return { reason: "symbolic link" };
    if (code === "ENXIO") return { reason: "not a regular file" };
    return { reason: `unreadable (${code ?? "error"})` };
  }
  try {
    const st = await fh.stat();
    const refused = await refusal(fh, st, full, lim);
    if (refused) return refused;
    // One byte more than the size: a file that grew since fstat is noticed, not cut.
    const buf = Buffer.alloc(st.size + 1);
    let off = 0;
    for (;;) {
      const { bytesRead } = await fh.read(buf, off, buf.length - off, off);
      if (bytesRead === 0) break;
      off += bytesRead;
      if (off === buf.length) return { reason: "changed while read", size: st.size };
    }
    return buf.subarray(0, off);
  } finally {
    await fh.close();
  }
}

/** Why the opened file is not read: its type, links, place or size. */
async function refusal(
  fh: FileHandle,
  st: Stats,
  full: string,
  lim: { maxFileBytes: number; runBytesLeft: number },
): Promise<Refusal | undefined> {
  if (!st.isFile()) return { reason: "not a regular file" };
  // Another name of a file elsewhere (say /etc/shadow, where hard links to others' files are
  // allowed): refused, whatever it is.
  if (st.nlink > 1) return { reason: "hard link" };
  // The descriptor's own path: a directory above it swapped for a link shows here.
  const where = await readlink(`/proc/self/fd/${fh.fd}`).catch(() => "");
  if (where !== full) return { reason: "outside the working directory" };
  if (st.size > lim.maxFileBytes)
    return { reason: `over ARTIFACT_MAX_FILE_BYTES (${lim.maxFileBytes})`, size: st.size };
  if (st.size > lim.runBytesLeft) return { reason: "over ARTIFACT_MAX_RUN_BYTES", size: st.size };
  return undefined;
}
