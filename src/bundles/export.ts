import { locateElement } from "../elements/locator.ts";
import { checkFolderPath } from "../elements/paths.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import type { FlowRevision } from "../store/revision-types.ts";
import type { Element, Scope, Store } from "../store/types.ts";
import {
  BUNDLE_FORMAT,
  type Bundle,
  type BundleFlow,
  type BundleRevision,
  type BundleScript,
  type ExportRequest,
} from "./format.ts";
import { portable } from "./references.ts";

/**
 * An export (docs/export-import.md): the selected flows, every flow they run as a sub-flow, and
 * every Python element they or their error handlers use, in one document.
 */
export async function exportBundle(
  store: Store,
  scope: Scope,
  req: ExportRequest,
  now: number,
  /** The largest export: past what an import accepts (LIMIT_BODY_BYTES) it could not be used. */
  maxBytes: number,
): Promise<Bundle> {
  let bytes = 0;
  const spend = (n: number) => {
    bytes += n;
    if (bytes > maxBytes)
      throw new SluiceError(ErrorCode.TOO_LARGE, [
        `the export would be over ${maxBytes} bytes, more than an import accepts: export fewer flows, or only their live revisions (allRevisions: false)`,
      ]);
  };
  const roots = await selected(store, scope, req);
  const allRevisions = req.allRevisions ?? true;
  const scripts = new Map<string, Element>();
  for (const el of roots) if (el.type === "PY") scripts.set(el.id, el);
  const queue = roots.filter((el) => el.type === "DPL");
  const seen = new Set<string>();
  const flows: BundleFlow[] = [];
  /** Script element ID → the highest version an exported release pins. */
  const pinned = new Map<string, number>();
  for (let el = queue.shift(); el; el = queue.shift()) {
    if (seen.has(el.id) || el.releaseVersion == null) continue;
    seen.add(el.id);
    const revs = allRevisions
      ? everyRevision(store, el.id)
      : [await store.flowRevision(el.id, el.releaseVersion)].filter((r) => r !== undefined);
    const revisions: BundleRevision[] = [];
    for await (const rev of revs) {
      if (rev.version === el.releaseVersion) notePins(pinned, rev);
      const p = await portable(store, scope, rev, (ref) => {
        if (ref.type === "PY") scripts.set(ref.id, ref);
        else if (!seen.has(ref.id)) queue.push(ref);
      });
      const revision = bundleRevision(rev, p);
      spend(JSON.stringify(revision).length);
      revisions.push(revision);
    }
    flows.push({
      path: el.path,
      name: el.name,
      status: el.status ?? "DRAFT",
      releaseVersion: el.releaseVersion,
      ...(el.description ? { description: el.description } : {}),
      revisions,
    });
  }
  const out: BundleScript[] = [];
  for (const el of scripts.values()) {
    const script = await bundleScript(store, el, pinned.get(el.id) ?? null);
    if (!script) continue;
    spend(script.content.length);
    out.push(script);
  }
  return {
    format: BUNDLE_FORMAT,
    formatVersion: 1,
    exportedAt: new Date(now).toISOString(),
    source: { app: scope.app, space: scope.space },
    allRevisions,
    flows,
    scripts: out,
  };
}

/**
 * A flow's revisions a page at a time, so that the size bound stops an export before a flow with
 * many large revisions is in memory whole.
 */
async function* everyRevision(store: Store, elementId: string): AsyncGenerator<FlowRevision> {
  const PAGE = 20;
  for (let from = 1; ; ) {
    const page = await store.allFlowRevisions(elementId, from, PAGE);
    yield* page;
    const last = page[page.length - 1];
    if (page.length < PAGE || !last) return;
    from = last.version + 1;
  }
}

function notePins(pinned: Map<string, number>, rev: FlowRevision): void {
  for (const pin of rev.scriptPins ?? [])
    pinned.set(pin.elementId, Math.max(pin.version, pinned.get(pin.elementId) ?? 0));
}

/**
 * One script of the file (docs/export-import.md, "Script versions"): the version the exported
 * releases pin (the highest, when they pin several), else the newest, with its number here.
 */
async function bundleScript(
  store: Store,
  el: Element,
  version: number | null,
): Promise<BundleScript | undefined> {
  const v =
    (version === null ? undefined : await store.scriptVersion(el.id, version)) ??
    (await store.scriptVersion(el.id, null));
  if (!v) return undefined;
  return {
    path: el.path,
    name: el.name,
    kind: v.kind,
    content: Buffer.from(v.content).toString("base64"),
    sha256: v.sha256,
    version: v.version,
  };
}

function bundleRevision(
  rev: FlowRevision,
  p: { flow: Record<string, unknown>; configure: Record<string, unknown> },
): BundleRevision {
  return {
    version: rev.version,
    name: rev.name,
    flow: p.flow,
    configure: p.configure,
    createdAt: rev.createdAt,
    ...(rev.userId ? { userId: rev.userId } : {}),
  };
}

/** Exactly one of a folder path, a folder ID or a list of locators. */
async function selected(store: Store, scope: Scope, req: ExportRequest): Promise<Element[]> {
  const given = [req.path, req.folderId, req.elements].filter((x) => x !== undefined).length;
  if (given !== 1) throw badRequest("give exactly one of path, folderId and elements");
  if (req.elements) {
    const out: Element[] = [];
    for (const loc of req.elements) out.push(await locateElement(store, scope, loc, "DPL"));
    return out;
  }
  let path = req.path;
  if (path !== undefined) {
    const problem = checkFolderPath(path);
    if (problem) throw badRequest(`path ${problem}`);
    if (!(await store.folderByPath(scope, path)))
      throw new SluiceError(ErrorCode.FOLDER_NOT_FOUND, [path]);
  } else {
    const folder = await store.folderById(scope, req.folderId ?? "");
    if (!folder) throw new SluiceError(ErrorCode.FOLDER_NOT_FOUND, [req.folderId ?? ""]);
    path = folder.path;
  }
  return store.elementsUnder(scope, path);
}
