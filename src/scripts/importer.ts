import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import { checkElementName, joinPath } from "../elements/paths.ts";
import type { Scope, Store } from "../store/types.ts";
import { parseHeader } from "./script-header.ts";
import type { CheckedFile, SyntaxChecker } from "./syntax-check.ts";
import { inspectZip } from "./zip-inspect.ts";

export interface UploadFile {
  filename: string;
  bytes: Buffer;
  /** The multipart layer cut the file at the size limit. */
  truncated: boolean;
}

export interface UploadResult {
  filePath: string;
  status: 0 | 1 | 2 | 3;
  message: string;
}

/**
 * Imports `.py` modules and `.zip` packages as PY elements (docs/script-service.md). Each item is checked
 * completely before one transaction stores it, so an item is all or nothing.
 */
export async function importScripts(
  deps: { store: Store; config: Config; clock: Clock; syntax: SyntaxChecker },
  scope: Scope,
  folder: { id: string; path: string },
  files: UploadFile[],
  overwrite: boolean,
  /** Recorded with each version the upload makes (docs/script-service.md, "Script versions"). */
  userId: string | null = null,
): Promise<UploadResult[]> {
  const results: UploadResult[] = [];
  for (const file of files) {
    results.push(await importOne(deps, scope, folder, file, overwrite, userId));
  }
  return results;
}

async function importOne(
  deps: { store: Store; config: Config; clock: Clock; syntax: SyntaxChecker },
  scope: Scope,
  folder: { id: string; path: string },
  file: UploadFile,
  overwrite: boolean,
  userId: string | null,
): Promise<UploadResult> {
  const { config } = deps;
  const base = file.filename.split(/[\\/]/).pop() ?? "";
  const match = /^(.*)\.(py|zip)$/i.exec(base);
  const name = match?.[1] ?? base;
  const filePath = joinPath(folder.path, name);
  const reject = (message: string): UploadResult => ({ filePath, status: 2, message });

  if (!match) return reject(`"${base}" is not a .py or .zip file`);
  const badName = checkElementName(name);
  if (badName) return reject(`element name "${name}" ${badName}`);
  if (file.truncated) {
    return {
      filePath,
      status: 3,
      message: `file is larger than ${config.limits.uploadFileBytes} bytes`,
    };
  }
  const kind = match[2]?.toLowerCase() === "zip" ? "package" : "module";
  const refused = await checkScriptBytes(deps, base, kind, file.bytes);
  if (refused) return { filePath, ...refused };

  const outcome = await deps.store.putScript(
    { scope, folderId: folder.id, name, kind, content: file.bytes, now: deps.clock.now(), userId },
    overwrite,
  );
  if (outcome === "exists")
    return { filePath, status: 1, message: "skipped: element exists and overwrite is false" };
  return { filePath, status: 0, message: outcome };
}

/**
 * The checks every script's bytes pass before they are stored, whether uploaded or imported
 * (docs/script-service.md, "Upload"; docs/export-import.md): the size limit, a package's zip
 * limits, and the sandboxed syntax check of the bytes the task will load. Null: it passes.
 */
export async function checkScriptBytes(
  deps: { config: Config; syntax: SyntaxChecker },
  base: string,
  kind: "module" | "package",
  bytes: Buffer,
): Promise<{ status: 2 | 3; message: string } | null> {
  const { config } = deps;
  if (bytes.length > config.limits.uploadFileBytes)
    return { status: 3, message: `file is larger than ${config.limits.uploadFileBytes} bytes` };
  // The bytes the task will load, and loaded the same way (docs/script-service.md, "Upload").
  let sources: CheckedFile[];
  let entry: { name: string; bytes: Buffer };
  if (kind === "module") {
    sources = [{ name: base, bytes }];
    entry = { name: base, bytes };
  } else {
    const verdict = await inspectZip(bytes, config.limits);
    if (!verdict.ok) return { status: verdict.status, message: verdict.message };
    sources = verdict.pyFiles.map((f) => ({
      name: f.name,
      bytes: f.source,
      decode: f.name === verdict.entry,
    }));
    const main = verdict.pyFiles.find((f) => f.name === verdict.entry);
    entry = { name: verdict.entry, bytes: main?.source ?? Buffer.alloc(0) };
  }
  // Declarations the service acts on are checked now, not when a task first runs.
  const { problem } = parseHeader(entry.bytes.toString());
  if (problem) return { status: 2, message: `${entry.name}: ${problem}` };
  const checked = await deps.syntax.check(sources);
  if (checked.ok) return null;
  const where = checked.file ?? base;
  if (checked.reason === "syntax")
    return {
      status: 2,
      message:
        checked.line !== undefined
          ? `Python syntax error in ${where} line ${checked.line}: ${checked.message}`
          : `Python cannot compile ${where}: ${checked.message}`,
    };
  if (checked.reason === "limit") return { status: 3, message: `${where}: ${checked.message}` };
  return { status: 2, message: `${where} could not be checked: ${checked.message}` };
}
