/** The store's part for folders, elements, flow revisions and script versions (the Store in types.ts). */

import type { ImportWrites } from "./import-types.ts";
import type {
  AppBounds,
  Element,
  ElementType,
  FlowStatus,
  Folder,
  Scope,
  ScriptElement,
} from "./model.ts";
import type {
  FlowRevision,
  FlowRevisionInfo,
  Page,
  ReleaseChange,
  ReleaseEvent,
  ScriptEnv,
  ScriptPin,
  ScriptVersion,
  ScriptVersionInfo,
} from "./revision-types.ts";

export interface ElementQuery {
  type: ElementType;
  name: string;
  folderId?: string;
}

export interface NewScriptElement {
  scope: Scope;
  folderId: string;
  name: string;
  kind: "module" | "package";
  content: Uint8Array;
  now: number;
  /** Who uploaded it: recorded with the version the upload makes. */
  userId?: string | null;
  /** The environment its dependencies resolved to at upload (docs/script-dependencies.md). */
  env?: ScriptEnv | null;
  /**
   * Versions the script keeps at most (LIMIT_VERSIONS_PER_SCRIPT); absent or 0: every one
   * (docs/script-service.md, "How many versions are kept").
   */
  keepVersions?: number;
  /** A new script is refused past `bounds.elements` (28010006); absent: no bound. */
  bounds?: AppBounds | undefined;
}

export interface NewFlowDeploy {
  scope: Scope;
  folderId: string;
  name: string;
  revisionName: string;
  flow: unknown;
  configure: unknown;
  description: Record<string, string> | null;
  user: Record<string, unknown> | null;
  now: number;
  /** false: a staged revision, stored without becoming the release (default true; docs/dataflow-service.md). */
  release?: boolean;
  /** The script versions the revision pins when it is released. */
  pins?: ScriptPin[] | null;
  /**
   * Revisions the flow keeps at most (LIMIT_REVISIONS_PER_FLOW); absent or 0: every one
   * (docs/dataflow-service.md, "How many revisions are kept").
   */
  keepRevisions?: number;
  /**
   * A new flow is refused past `bounds.elements` (28010006), a release that makes the app's active
   * schedules more past `bounds.schedules` (28010007); absent: no bound.
   */
  bounds?: AppBounds | undefined;
}

export interface ElementStore {
  folderByPath(scope: Scope, path: string): Promise<Folder | undefined>;
  folderById(scope: Scope, id: string): Promise<Folder | undefined>;
  /** Creates the folder and every missing ancestor. */
  ensureFolder(scope: Scope, path: string, now: number): Promise<Folder>;

  findElements(scope: Scope, query: ElementQuery): Promise<Element[]>;
  elementById(scope: Scope, id: string): Promise<Element | undefined>;
  scriptById(scope: Scope, id: string): Promise<ScriptElement | undefined>;
  /**
   * Insert or (when `overwrite`) replace a script; returns "created" | "overwritten" | "exists",
   * or "full": past `keepVersions` with no version that may go, nothing was written.
   */
  putScript(
    el: NewScriptElement,
    overwrite: boolean,
  ): Promise<"created" | "overwritten" | "exists" | "full">;

  /**
   * Stores a new revision (creating the element as DRAFT if new); with `release`, makes it the
   * release and records the DEPLOY in the release history, in one transaction. Past
   * `keepRevisions` it removes the oldest revisions nothing needs there, or throws 28010005 and
   * writes nothing when none may go.
   */
  deployFlow(deploy: NewFlowDeploy): Promise<{ element: Element; version: number }>;
  /** A release change with its history event, in one transaction; false: no such revision. */
  changeRelease(change: ReleaseChange): Promise<boolean>;
  /** Which of `versions` an element (a flow's revisions, a script's versions) still keeps. */
  keptVersions(
    type: ElementType,
    elementId: string,
    versions: readonly number[],
  ): Promise<Set<number>>;
  /**
   * Which of `versions` a flow once released and no longer keeps: its release history names them,
   * LIMIT_REVISIONS_PER_FLOW removed them (docs/dataflow-service.md, "How many revisions are kept").
   */
  removedRevisions(elementId: string, versions: readonly number[]): Promise<Set<number>>;
  /** One page of an element's revisions, newest first. */
  flowRevisions(elementId: string, limit: number, offset: number): Promise<Page<FlowRevisionInfo>>;
  /** One page of an element's release history, newest first. */
  releaseHistory(elementId: string, limit: number, offset: number): Promise<Page<ReleaseEvent>>;
  /** One page of a script's versions, newest first. */
  scriptVersions(
    elementId: string,
    limit: number,
    offset: number,
  ): Promise<Page<ScriptVersionInfo>>;
  /** One version of a script with its bytes; `null`: the newest. */
  scriptVersion(elementId: string, version: number | null): Promise<ScriptVersion | undefined>;
  /** The newest version's number, without its bytes (what a task records when accepted). */
  newestScriptVersion(elementId: string): Promise<number | undefined>;
  /** Renames the newest revision; false when the element has none. */
  renameRevision(elementId: string, name: string): Promise<boolean>;
  setFlowStatus(
    elementId: string,
    status: FlowStatus,
    user: Record<string, unknown> | null,
    now: number,
  ): Promise<void>;
  flowRevision(elementId: string, version: number): Promise<FlowRevision | undefined>;
  /**
   * A flow's revisions with their graph and configure, oldest first (export, import): every one,
   * or those from version `from` on, at most `limit` (an export pages through them).
   */
  allFlowRevisions(elementId: string, from?: number, limit?: number): Promise<FlowRevision[]>;
  /** Elements of every type in the folder at `path` and the folders below it (export). */
  elementsUnder(scope: Scope, path: string): Promise<Element[]>;
  /** An import's writes in one transaction; answers the IDs of the flows written, in order. */
  applyImport(scope: Scope, writes: ImportWrites, now: number): Promise<string[]>;
  /** A dry run's: refuses (28010006, 28010007) where `applyImport` would, and writes nothing. */
  checkImport(scope: Scope, writes: ImportWrites): Promise<void>;
}
