import { type Locator, locateElement } from "../elements/locator.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import { pageWindow, totalPages } from "../monitor/paging.ts";
import type {
  FlowRevision,
  FlowRevisionInfo,
  ReleaseEvent,
  ScriptPin,
} from "../store/revision-types.ts";
import type { Element, FlowStatus, Scope, Store } from "../store/types.ts";
import { diffRevisions, type RevisionDiff } from "./revision-diff.ts";

/** A revision's place in its element's life (docs/dataflow-service.md, "States"). */
export type RevisionStage = "release" | "staged" | "past";

export interface RevisionSummary {
  version: number;
  revisionName: string;
  deployedBy: string | null;
  deployedAt: number;
  releasedAt: number | null;
  status: FlowStatus;
  stage: RevisionStage;
  live: boolean;
  scriptPins: ScriptPin[] | null;
}

export interface ElementSummary {
  elementId: string;
  elementName: string;
  elementType: "DPL";
  folderId: string;
  path: string;
  status: FlowStatus;
  releaseVersion: number | null;
}

export interface Paged<T> {
  element: ElementSummary;
  pageNo: number;
  pageSize: number;
  totalCount: number;
  totalPage: number;
  items: T[];
}

export interface PageRequest {
  pageNo: number;
  pageSize: number;
}

const elementSummary = (el: Element): ElementSummary => ({
  elementId: el.id,
  elementName: el.name,
  elementType: "DPL",
  folderId: el.folderId,
  path: el.path,
  status: el.status ?? "DRAFT",
  releaseVersion: el.releaseVersion,
});

/**
 * The release is the one revision that carries the element's status (live when APPROVED); any
 * other revision is past when it was the release once, else staged (docs/dataflow-service.md).
 */
export function summarize(el: Element, rev: FlowRevisionInfo): RevisionSummary {
  const isRelease = rev.version === el.releaseVersion;
  const status: FlowStatus = isRelease
    ? (el.status ?? "DRAFT")
    : rev.releasedAt !== null
      ? "OBSOLETE"
      : "DRAFT";
  return {
    version: rev.version,
    revisionName: rev.name,
    deployedBy: rev.userId,
    deployedAt: rev.createdAt,
    releasedAt: rev.releasedAt,
    status,
    stage: isRelease ? "release" : rev.releasedAt !== null ? "past" : "staged",
    live: isRelease && el.status === "APPROVED",
    scriptPins: rev.scriptPins,
  };
}

/** Reads of a flow's revisions and release history, scoped like every read (docs/auth.md). */
export function createRevisionReads(store: Store) {
  return {
    list: (scope: Scope, loc: Locator, page: PageRequest) =>
      paged(store, scope, loc, page, (id, l, o) => store.flowRevisions(id, l, o), summarize),
    releases: (scope: Scope, loc: Locator, page: PageRequest) =>
      paged(store, scope, loc, page, (id, l, o) => store.releaseHistory(id, l, o), releaseEntry),
    read: (scope: Scope, loc: Locator, version: number) => read(store, scope, loc, version),
    diff: (scope: Scope, loc: Locator, fromVersion: number, toVersion: number) =>
      diff(store, scope, loc, fromVersion, toVersion),
  };
}

export type RevisionReads = ReturnType<typeof createRevisionReads>;

function locate(store: Store, scope: Scope, loc: Locator): Promise<Element> {
  if ((loc.elementType ?? "DPL") !== "DPL") throw badRequest("elementType must be DPL");
  return locateElement(store, scope, loc, "DPL");
}

async function revision(store: Store, el: Element, version: number): Promise<FlowRevision> {
  const rev = await store.flowRevision(el.id, version);
  if (!rev) throw new SluiceError(ErrorCode.REVISION_NOT_FOUND, [el.name, String(version)]);
  return rev;
}

async function paged<S, T>(
  store: Store,
  scope: Scope,
  loc: Locator,
  page: PageRequest,
  readPage: (id: string, limit: number, offset: number) => Promise<{ total: number; items: S[] }>,
  present: (el: Element, item: S) => T,
): Promise<Paged<T>> {
  const { limit, offset } = pageWindow(page.pageNo, page.pageSize);
  const el = await locate(store, scope, loc);
  const { total, items } = await readPage(el.id, limit, offset);
  return {
    element: elementSummary(el),
    pageNo: page.pageNo,
    pageSize: page.pageSize,
    totalCount: total,
    totalPage: totalPages(total, page.pageSize),
    items: items.map((i) => present(el, i)),
  };
}

const releaseEntry = (_el: Element, e: ReleaseEvent) => ({
  version: e.version,
  action: e.action,
  status: e.status,
  userId: e.userId,
  at: e.at,
  scriptPins: e.scriptPins,
});

async function read(store: Store, scope: Scope, loc: Locator, version: number) {
  const el = await locate(store, scope, loc);
  const rev = await revision(store, el, version);
  return {
    element: elementSummary(el),
    ...summarize(el, rev),
    flow: rev.flow,
    configure: rev.configure,
  };
}

async function diff(
  store: Store,
  scope: Scope,
  loc: Locator,
  fromVersion: number,
  toVersion: number,
): Promise<{ element: ElementSummary; from: RevisionSummary; to: RevisionSummary } & RevisionDiff> {
  const el = await locate(store, scope, loc);
  const [a, b] = [await revision(store, el, fromVersion), await revision(store, el, toVersion)];
  return {
    element: elementSummary(el),
    from: summarize(el, a),
    to: summarize(el, b),
    ...diffRevisions(a, b),
  };
}
