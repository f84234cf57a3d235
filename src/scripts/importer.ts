import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import { appBounds } from "../config-limits.ts";
import { checkElementName, joinPath, nfc } from "../elements/paths.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { ScriptEnv } from "../store/revision-types.ts";
import type { Scope, Store } from "../store/types.ts";
import {
  type Declared,
  parseInlineMetadata,
  parseRequirementsTxt,
  requirementName,
} from "./requirements.ts";
import type { ScriptEnvs } from "./script-envs.ts";
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
type ImportDeps = {
  store: Store;
  config: Config;
  clock: Clock;
  syntax: SyntaxChecker;
  /** Builds environments of declared dependencies; absent: an element that declares some is refused. */
  envs?: ScriptEnvs | undefined;
  /** The data directory's free space: below its floor, no environment is built (docs/security.md, "Disk"). */
  disk?: { state(): Promise<{ freeBytes: number; low: boolean }> } | undefined;
};

export async function importScripts(
  deps: ImportDeps,
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
  // An overwrite may have left an environment unused (docs/script-dependencies.md, "Caching").
  // Best effort: a failure here changes nothing of the upload, and the periodic pass retries.
  if (deps.envs && results.some((r) => r.status === 0))
    await deps.envs.collect(deps.store).catch(() => []);
  return results;
}

async function importOne(
  deps: ImportDeps,
  scope: Scope,
  folder: { id: string; path: string },
  file: UploadFile,
  overwrite: boolean,
  userId: string | null,
): Promise<UploadResult> {
  const { config } = deps;
  const base = nfc(file.filename.split(/[\\/]/).pop() ?? "");
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
  const kind: "module" | "package" = match[2]?.toLowerCase() === "zip" ? "package" : "module";
  const refused = await checkScriptBytes(deps, base, kind, file.bytes);
  if (refused) return { filePath, ...refused };
  // Its dependencies are installed before the item is stored: imported means ready to run.
  const env = await installDependencies(deps, base, kind, file.bytes);
  if ("message" in env) return { filePath, status: 2, message: env.message };
  try {
    const el = { scope, folderId: folder.id, name, kind, content: file.bytes, userId };
    const keepVersions = config.limits.versionsPerScript;
    const bounds = appBounds(config.limits);
    const outcome = await deps.store
      .putScript({ ...el, now: deps.clock.now(), env: env.env, keepVersions, bounds }, overwrite)
      .catch((err: unknown) => {
        // docs/security.md, "What an app may hold": this item refused, the others go on.
        if (err instanceof SluiceError && err.code === ErrorCode.ELEMENT_LIMIT) return err;
        throw err;
      });
    if (outcome instanceof SluiceError) return { filePath, status: 3, message: outcome.message };
    if (outcome === "exists")
      return { filePath, status: 1, message: "skipped: element exists and overwrite is false" };
    // docs/script-service.md, "How many versions are kept".
    if (outcome === "full") return { filePath, status: 3, message: fullMessage(keepVersions) };
    return { filePath, status: 0, message: outcome };
  } finally {
    env.release();
  }
}

const fullMessage = (keep: number) =>
  `the element keeps ${keep} versions (LIMIT_VERSIONS_PER_SCRIPT) and none of them may be removed: each older one is pinned by a kept flow revision or run by an unfinished task; activate those flows again (they then pin the newest) or wait for the tasks to end`;

/** The environment of the item's declared dependencies (docs/script-dependencies.md). */
async function installDependencies(
  deps: ImportDeps,
  base: string,
  kind: "module" | "package",
  bytes: Buffer,
): Promise<{ env: ScriptEnv | null; release(): void } | { message: string }> {
  const declared = await declaredDependencies(base, kind, bytes);
  if ("problem" in declared) return { message: declared.problem };
  const reqs = declared.requirements;
  if (reqs.length === 0) return { env: null, release: () => {} };
  if (!deps.envs) return { message: "dependencies cannot be installed by this service" };
  // An environment is written to the data directory's filesystem, next to the database.
  const disk = await deps.disk?.state().catch(() => undefined);
  if (disk?.low)
    return {
      message: `dependencies cannot be installed now: the data directory's filesystem has ${disk.freeBytes} bytes free, below DATA_DIR_FREE_BYTES_MIN`,
    };
  const built = await deps.envs.build(reqs, [...new Set(reqs.map(requirementName))]);
  if (!built.ok) {
    built.release();
    return { message: `dependencies could not be installed: ${built.message}` };
  }
  return { env: built.env, release: built.release };
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
  const declared = await declaredDependencies(base, kind, bytes);
  if ("problem" in declared) return { status: 2, message: declared.problem };
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

/**
 * What an item declares it needs (docs/script-dependencies.md, "Declaring"): a module's
 * `# /// script` block; a package's `requirements.txt` next to its main.py, or its main.py's
 * block, not both. Called on bytes that passed `checkScriptBytes`'s zip inspection.
 */
export async function declaredDependencies(
  base: string,
  kind: "module" | "package",
  bytes: Buffer,
): Promise<Declared> {
  if (kind === "module") return parseInlineMetadata(bytes.toString(), base);
  const zip = await inspectZip(bytes, {
    zipEntries: Number.POSITIVE_INFINITY,
    zipUncompressedBytes: Number.POSITIVE_INFINITY,
  });
  if (!zip.ok) return { problem: zip.message };
  const main = zip.pyFiles.find((f) => f.name === zip.entry);
  const inline = parseInlineMetadata(main?.source.toString() ?? "", zip.entry);
  if (!zip.requirements || "problem" in inline) return inline;
  if (inline.requirements.length > 0)
    return {
      problem: `declare dependencies in ${zip.requirements.name} or in ${zip.entry}'s "# /// script" block, not both`,
    };
  return parseRequirementsTxt(zip.requirements.text.toString(), zip.requirements.name);
}
