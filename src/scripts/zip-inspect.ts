import yauzl from "yauzl";

export type ZipVerdict =
  | {
      ok: true;
      pyFiles: { name: string; source: Buffer }[];
      entry: string;
      /** Every file (not folder) with its uncompressed size. */
      files: { name: string; size: number }[];
      /** `requirements.txt` next to the entry, when there is one (docs/script-dependencies.md). */
      requirements?: { name: string; text: Buffer };
    }
  | { ok: false; status: 2 | 3; message: string };

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;

type Refusal = Extract<ZipVerdict, { ok: false }>;

/**
 * Checks a package zip before import (docs/script-service.md): no `../`, absolute paths or links, entry
 * count and uncompressed size within limits, `main.py` at the root or inside a single top folder.
 * Returns the .py sources for the syntax check.
 */
export async function inspectZip(
  bytes: Buffer,
  limits: { zipEntries: number; zipUncompressedBytes: number },
): Promise<ZipVerdict> {
  const zip = await openZip(bytes);
  if ("ok" in zip) return zip;
  if (zip.entryCount > limits.zipEntries) {
    zip.close();
    return {
      ok: false,
      status: 3,
      message: `zip has ${zip.entryCount} entries, over the limit of ${limits.zipEntries}`,
    };
  }
  const entries = await listEntries(zip);
  if (!Array.isArray(entries)) return entries;
  const unsafe = checkEntries(entries, limits.zipUncompressedBytes);
  if (unsafe) return unsafe;
  const files = entries.filter((e) => !e.fileName.endsWith("/"));
  const code = files.filter((e) => !isFinderMetadata(e.fileName));
  const entry = entryOf(code);
  if (typeof entry !== "string") return entry;
  const pyFiles = await readPyFiles(zip, code);
  if (!Array.isArray(pyFiles)) return pyFiles;
  const requirements = await readRequirements(zip, code, entry);
  if (requirements && "ok" in requirements) return requirements;
  zip.close();
  const list = files.map((e) => ({ name: e.fileName, size: e.uncompressedSize }));
  return { ok: true, pyFiles, entry, files: list, ...(requirements ? { requirements } : {}) };
}

async function openZip(bytes: Buffer): Promise<yauzl.ZipFile | Refusal> {
  try {
    return await new Promise<yauzl.ZipFile>((resolve, reject) =>
      yauzl.fromBuffer(bytes, { lazyEntries: true, strictFileNames: false }, (err, z) =>
        err ? reject(err) : resolve(z),
      ),
    );
  } catch (err) {
    return { ok: false, status: 2, message: `not a valid zip file: ${(err as Error).message}` };
  }
}

async function listEntries(zip: yauzl.ZipFile): Promise<yauzl.Entry[] | Refusal> {
  const entries: yauzl.Entry[] = [];
  try {
    await new Promise<void>((resolve, reject) => {
      zip.on("entry", (e: yauzl.Entry) => {
        entries.push(e);
        zip.readEntry();
      });
      zip.on("end", resolve);
      zip.on("error", reject);
      zip.readEntry();
    });
  } catch (err) {
    const text = (err as Error).message;
    // yauzl itself refuses `../` and absolute names while listing; that is an unsafe entry, not corruption.
    if (/relative path|absolute path/.test(text))
      return { ok: false, status: 2, message: `unsafe zip entry: ${text}` };
    return { ok: false, status: 2, message: `corrupt zip: ${text}` };
  }
  return entries;
}

/** The first entry that escapes the folder, is a link, or takes the total past the size limit. */
function checkEntries(entries: yauzl.Entry[], maxBytes: number): Refusal | undefined {
  let total = 0;
  for (const e of entries) {
    const name = e.fileName;
    if (
      name.startsWith("/") ||
      name.includes("\\") ||
      /^[A-Za-z]:/.test(name) ||
      name.split("/").includes("..")
    ) {
      return { ok: false, status: 2, message: `unsafe zip entry "${name}"` };
    }
    if (((e.externalFileAttributes >>> 16) & S_IFMT) >>> 0 === S_IFLNK) {
      return { ok: false, status: 2, message: `zip entry "${name}" is a link` };
    }
    total += e.uncompressedSize;
    if (total > maxBytes) {
      return { ok: false, status: 3, message: `zip uncompresses to more than ${maxBytes} bytes` };
    }
  }
  return undefined;
}

/**
 * What macOS Finder's "Compress" adds beside the files (AppleDouble `._name` files under
 * `__MACOSX/`): never Python nor part of the package, so neither checked nor a top-level folder
 * (docs/script-service.md, "Writing scripts"); the task's harness skips it the same way.
 */
const isFinderMetadata = (name: string) => name.startsWith("__MACOSX/");

/** `main.py` at the root, or in the one top-level folder. */
function entryOf(files: yauzl.Entry[]): string | Refusal {
  if (files.some((e) => e.fileName === "main.py")) return "main.py";
  const tops = new Set(files.map((e) => e.fileName.replace(/\/.*$/s, "/")));
  const [top] = [...tops];
  if (tops.size === 1 && top && files.some((e) => e.fileName === `${top}main.py`))
    return `${top}main.py`;
  const shown = [...tops].slice(0, 5).join(", ") + (tops.size > 5 ? ", …" : "");
  return {
    ok: false,
    status: 2,
    message: `zip has no main.py at its root or in a single top-level folder (its top level holds ${shown || "nothing"})`,
  };
}

async function readPyFiles(
  zip: yauzl.ZipFile,
  files: yauzl.Entry[],
): Promise<{ name: string; source: Buffer }[] | Refusal> {
  const pyFiles: { name: string; source: Buffer }[] = [];
  for (const e of files.filter((f) => f.fileName.endsWith(".py"))) {
    let bytes: Buffer;
    try {
      bytes = await readEntry(zip, e);
    } catch (err) {
      // Stored sizes that do not match the data, broken deflate data, an unsupported compression
      // method or encryption: the item is rejected (docs/script-service.md, "Upload"), not the request.
      const text = err instanceof Error ? err.message : String(err);
      return { ok: false, status: 2, message: `corrupt zip: entry "${e.fileName}": ${text}` };
    }
    pyFiles.push({ name: e.fileName, source: bytes });
  }
  return pyFiles;
}

async function readRequirements(
  zip: yauzl.ZipFile,
  files: yauzl.Entry[],
  entry: string,
): Promise<{ name: string; text: Buffer } | Refusal | undefined> {
  const name = entry.replace(/main\.py$/, "requirements.txt");
  const e = files.find((f) => f.fileName === name);
  if (!e) return undefined;
  try {
    return { name, text: await readEntry(zip, e) };
  } catch (err) {
    const text = err instanceof Error ? err.message : String(err);
    return { ok: false, status: 2, message: `corrupt zip: entry "${name}": ${text}` };
  }
}

function readEntry(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => {
      if (err || !stream) return reject(err ?? new Error("no stream"));
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => resolve(Buffer.concat(chunks)));
      stream.on("error", reject);
    });
  });
}
