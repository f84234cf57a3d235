import { checkElementName, checkFolderPath, joinPath, nfc } from "../elements/paths.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import type {
  AppBounds,
  Element,
  ElementType,
  ImportFlow,
  ImportWrites,
  Scope,
  Store,
} from "../store/types.ts";
import { isUniqueViolation } from "../store/unique-violation.ts";
import type { Bundle, BundleFlow, BundleScript, ImportItem, ImportReport } from "./format.ts";
import { portable, type Ref, refsOf, resolveRef } from "./references.ts";

/**
 * An import (docs/export-import.md): planned in full before anything is written, so a dry run and
 * a refusal answer the same plan; written in one transaction. Same content is skipped, so an
 * import can be repeated.
 */
/** The checks an imported script passes, as an uploaded one does: null, or why it is refused. */
export type ScriptCheck = (
  name: string,
  kind: "module" | "package",
  content: Buffer,
) => Promise<string | null>;

/**
 * The deploy validator for a revision an import writes (src/flows/validator.ts): the errors,
 * as one text, or null. `refExists` says whether a locator names an element of the file or of
 * this space. Without it an import stored graphs no deploy accepts, and activating or running
 * one failed as an internal error.
 */
export type RevisionCheck = (
  rev: { flow: unknown; configure: unknown },
  refExists: (ref: Pick<Ref, "type" | "loc">) => Promise<boolean>,
) => Promise<string | null>;

interface Deps {
  store: Store;
  checkScript: ScriptCheck;
  checkRevision: RevisionCheck;
  /** LIMIT_REVISIONS_PER_FLOW: a flow may not end up holding more (0: no bound). */
  keepRevisions: number;
  /** What the app may hold, checked in the import's transaction (docs/security.md). */
  bounds?: AppBounds | undefined;
}

export async function importBundle(
  deps: Deps,
  scope: Scope,
  user: string | null,
  req: { bundle: Bundle; dryRun?: boolean | undefined },
  now: number,
): Promise<{ report: ImportReport; flowIds: string[] }> {
  const dryRun = req.dryRun ?? false;
  const { store } = deps;
  // Two imports of the same file at once both plan "create"; the second to commit meets the
  // first's rows on a unique key and rolls back. It then plans again against what is there now
  // (most often: everything skipped) instead of answering an internal error.
  for (let attempt = 0; ; attempt++) {
    const { report, writes } = await planImport(deps, scope, req.bundle, user);
    report.dryRun = dryRun;
    const bounded = { ...writes, bounds: deps.bounds };
    // A dry run answers what the import would: its conflicts, else a bound's refusal.
    if (dryRun) {
      if (report.conflicts.length === 0) await store.checkImport(scope, bounded);
      return { report, flowIds: [] };
    }
    if (report.conflicts.length > 0) throw conflictError(report.conflicts);
    try {
      return { report, flowIds: await store.applyImport(scope, bounded, now) };
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      if (attempt >= 2)
        throw new SluiceError(ErrorCode.IMPORT_CONFLICT, [
          "the same elements kept changing while this import was written; run it again",
        ]);
    }
  }
}

function conflictError(conflicts: ImportItem[]): SluiceError {
  const shown = conflicts
    .slice(0, 5)
    .map((c) => `${c.elementType} ${joinPath(c.path, c.elementName)}: ${c.reason ?? "conflict"}`);
  const more = conflicts.length > 5 ? `; and ${conflicts.length - 5} more` : "";
  const n = conflicts.length === 1 ? "1 conflict" : `${conflicts.length} conflicts`;
  return new SluiceError(ErrorCode.IMPORT_CONFLICT, [
    `${n} (POST /import with dryRun lists them): ${shown.join("; ")}${more}`,
  ]);
}

interface Plan {
  report: ImportReport;
  writes: ImportWrites;
}

async function planImport(
  deps: Deps,
  scope: Scope,
  bundle: Bundle,
  user: string | null,
): Promise<Plan> {
  const { store } = deps;
  checkNames(bundle);
  const plan: Plan = {
    report: { dryRun: true, created: [], updated: [], skipped: [], conflicts: [] },
    writes: { scripts: [], flows: [], userId: user },
  };
  for (const s of bundle.scripts) await planScript(deps, scope, s, plan);
  for (const f of bundle.flows) {
    const item: ImportItem = { elementType: "DPL", path: f.path, elementName: f.name };
    const planned = await planFlow(deps, scope, f, user);
    if (typeof planned === "string") {
      plan.report[planned].push(item);
      continue;
    }
    if ("conflict" in planned) {
      plan.report.conflicts.push({ ...item, reason: planned.conflict });
      continue;
    }
    const missing = await missingRefs(store, scope, bundle, planned);
    if (missing) {
      plan.report.conflicts.push({ ...item, reason: missing });
      continue;
    }
    const invalid = await invalidRevision(deps, scope, bundle, planned);
    if (invalid) {
      plan.report.conflicts.push({ ...item, reason: invalid });
      continue;
    }
    const versions = planned.revisions.map((r) => r.version);
    plan.report[planned.elementId === null ? "created" : "updated"].push({ ...item, versions });
    plan.writes.flows.push(planned);
  }
  return plan;
}

/** Paths and names as a deploy or upload checks them; each element once in the file. */
function checkNames(bundle: Bundle): void {
  const seen = new Set<string>();
  const entries = [
    ...bundle.scripts.map((s) => ["PY", s] as const),
    ...bundle.flows.map((f) => ["DPL", f] as const),
  ];
  for (const [type, e] of entries) {
    e.path = nfc(e.path);
    e.name = nfc(e.name);
    const problem = checkFolderPath(e.path) ?? checkElementName(e.name);
    if (problem) throw badRequest(`bundle: ${type} ${joinPath(e.path, e.name)}: ${problem}`);
    const key = `${type} ${joinPath(e.path, e.name)}`;
    if (seen.has(key)) throw badRequest(`bundle: ${key} is listed twice`);
    seen.add(key);
  }
}

async function existing(
  store: Store,
  scope: Scope,
  type: ElementType,
  path: string,
  name: string,
): Promise<Element | undefined> {
  const folder = await store.folderByPath(scope, path);
  if (!folder) return undefined;
  return (await store.findElements(scope, { type, name, folderId: folder.id }))[0];
}

async function planScript(deps: Deps, scope: Scope, s: BundleScript, plan: Plan) {
  const { store } = deps;
  const item: ImportItem = { elementType: "PY", path: s.path, elementName: s.name };
  const bytes = Buffer.from(s.content, "base64");
  const content = new Uint8Array(bytes);
  const el = await existing(store, scope, "PY", s.path, s.name);
  if (!el) {
    // A file is not trusted more than an upload: the same limits and syntax check.
    const refused = await deps.checkScript(s.name, s.kind, bytes);
    if (refused) {
      plan.report.conflicts.push({ ...item, reason: `refused as an upload would be: ${refused}` });
      return;
    }
    plan.report.created.push(item);
    plan.writes.scripts.push({ path: s.path, name: s.name, kind: s.kind, content });
    return;
  }
  const now = await store.scriptById(scope, el.id);
  const same = now && now.kind === s.kind && Buffer.from(now.content).equals(content);
  if (same) plan.report.skipped.push(item);
  else plan.report.conflicts.push({ ...item, reason: "its content differs from this space's" });
}

type FlowPlan = ImportFlow | { conflict: string } | "skipped";

/** A new flow, the revisions an existing one lacks, or why it conflicts. */
async function planFlow(
  deps: Pick<Deps, "store" | "keepRevisions">,
  scope: Scope,
  f: BundleFlow,
  user: string | null,
): Promise<FlowPlan> {
  const { store } = deps;
  const versions = f.revisions.map((r) => r.version);
  if (new Set(versions).size !== versions.length)
    throw badRequest(`bundle: DPL ${joinPath(f.path, f.name)} lists a revision twice`);
  if (!versions.includes(f.releaseVersion))
    throw badRequest(`bundle: DPL ${joinPath(f.path, f.name)} lacks its release revision`);
  const revision = (r: BundleFlow["revisions"][number]) => ({
    version: r.version,
    name: r.name,
    flow: r.flow,
    configure: r.configure,
    createdAt: r.createdAt,
    userId: r.userId ?? null,
  });
  const el = await existing(store, scope, "DPL", f.path, f.name);
  const base = { path: f.path, name: f.name, user: user ? { userId: user } : null };
  if (!el) {
    const over = overBound(deps.keepRevisions, f.revisions.length);
    if (over) return { conflict: over };
    return {
      ...base,
      elementId: null,
      status: f.status,
      description: f.description ?? null,
      revisions: f.revisions.map(revision),
      releaseVersion: f.releaseVersion,
    };
  }
  const held = new Map<number, string>();
  for (const rev of await store.allFlowRevisions(el.id))
    held.set(rev.version, JSON.stringify(await portable(store, scope, rev)));
  const missing = [];
  for (const r of f.revisions) {
    const text = held.get(r.version);
    if (text === undefined) missing.push(revision(r));
    else if (text !== JSON.stringify({ flow: r.flow, configure: r.configure }))
      return { conflict: `revision ${r.version} differs from this space's revision ${r.version}` };
  }
  // A number the bound freed is never given to another graph: the runs that used it would read
  // and re-run that one (docs/export-import.md).
  const removed = await store.removedRevisions(
    el.id,
    missing.map((r) => r.version),
  );
  const reused = missing.find((r) => removed.has(r.version));
  if (reused)
    return {
      conflict: `revision ${reused.version} was removed here (LIMIT_REVISIONS_PER_FLOW keeps the newest); its number is not used again`,
    };
  const releaseMoves = f.releaseVersion > (el.releaseVersion ?? 0);
  if (missing.length === 0 && !releaseMoves) return "skipped";
  const over = missing.length > 0 && overBound(deps.keepRevisions, held.size + missing.length);
  if (over) return { conflict: over };
  return {
    ...base,
    elementId: el.id,
    status: f.status,
    description: null,
    revisions: missing,
    releaseVersion: releaseMoves ? f.releaseVersion : null,
  };
}

/**
 * An import never leaves a flow holding more revisions than a deploy could (docs/export-import.md):
 * its revisions other than the release are staged here, which no deploy may remove.
 */
function overBound(keep: number, total: number): string | false {
  if (keep <= 0 || total <= keep) return false;
  return `it would hold ${total} revisions, more than LIMIT_REVISIONS_PER_FLOW (${keep}) keeps; export only the live revisions (allRevisions false) or fewer of them`;
}

/** Why a written revision could not run here: an element it uses is in neither place. */
async function missingRefs(
  store: Store,
  scope: Scope,
  bundle: Bundle,
  f: ImportFlow,
): Promise<string | undefined> {
  for (const r of f.revisions) {
    for (const ref of refsOf(r.flow, r.configure)) {
      if (inBundle(bundle, ref) || (await resolveRef(store, scope, ref))) continue;
      const name = ref.loc.elementName ?? `elementId ${String(ref.loc.elementId)}`;
      return `revision ${r.version} uses ${ref.type ?? "element"} ${name}, which neither the file nor this space holds`;
    }
  }
  return undefined;
}

/** Why a written revision is refused: the deploy validator's errors for it. */
async function invalidRevision(
  deps: Deps,
  scope: Scope,
  bundle: Bundle,
  f: ImportFlow,
): Promise<string | undefined> {
  const refExists = async (ref: Pick<Ref, "type" | "loc">) =>
    inBundle(bundle, ref) || (await resolveRef(deps.store, scope, ref)) !== undefined;
  for (const r of f.revisions) {
    const problem = await deps.checkRevision(r, refExists);
    if (problem) return `revision ${r.version} does not validate as a deploy: ${problem}`;
  }
  return undefined;
}

function inBundle(bundle: Bundle, ref: Pick<Ref, "type" | "loc">): boolean {
  const { loc, type } = ref;
  if (loc.elementId !== undefined || loc.folderId !== undefined || !loc.elementName) return false;
  const match = (e: { path: string; name: string }) =>
    e.name === loc.elementName && (loc.path === undefined || e.path === loc.path);
  return (
    (type !== "DPL" && bundle.scripts.some(match)) || (type !== "PY" && bundle.flows.some(match))
  );
}
