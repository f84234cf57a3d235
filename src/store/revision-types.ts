import type { AppBounds, FlowStatus } from "./model.ts";

/**
 * Shapes of flow revisions, releases and script versions as the Store answers them
 * (docs/dataflow-service.md, "Revisions and releases"; docs/script-service.md, "Script versions").
 */

/** One upload of a PY element (docs/script-service.md, "Script versions"). */
export interface ScriptVersionInfo {
  elementId: string;
  version: number;
  kind: "module" | "package";
  sha256: string;
  size: number;
  userId: string | null;
  createdAt: number;
  /** The environment of its declared dependencies; null: none declared (docs/script-dependencies.md). */
  env: ScriptEnv | null;
}

/**
 * A resolved set of Python packages, shared by every version that resolved to it
 * (docs/script-dependencies.md): `hash` names its directory `DATA_DIR/envs/<hash>`.
 */
export interface ScriptEnv {
  hash: string;
  /** `name==version` of every installed distribution, sorted (names normalized, PEP 503). */
  packages: string[];
  /** The projects the element declared (normalized names): their modules are imported warm. */
  declared: string[];
}

export interface ScriptVersion extends ScriptVersionInfo {
  content: Uint8Array;
}

/** The script version a released revision's script node runs (docs/dataflow-service.md). */
export interface ScriptPin {
  nodeId: string;
  elementId: string;
  elementName: string;
  path: string;
  version: number;
  sha256: string;
}

export interface FlowRevisionInfo {
  elementId: string;
  version: number;
  name: string;
  createdAt: number;
  userId: string | null;
  /** When it last became the release; null: never released. */
  releasedAt: number | null;
  /** The script versions pinned when it last became the release; null: none pinned. */
  scriptPins: ScriptPin[] | null;
}

export interface FlowRevision extends FlowRevisionInfo {
  flow: unknown;
  configure: unknown;
}

export type ReleaseAction = "DEPLOY" | "ACTIVATE" | "ROLLBACK" | "DEACTIVATE" | "IMPORT";

/** One release change (docs/dataflow-service.md, "Revisions and releases"). */
export interface ReleaseEvent {
  id: string;
  elementId: string;
  /** The release after the change. */
  version: number | null;
  action: ReleaseAction;
  /** The element's status after the change. */
  status: FlowStatus;
  userId: string | null;
  at: number;
  scriptPins: ScriptPin[] | null;
}

/** A release change as the lifecycle asks for it: one transaction with its history event. */
export interface ReleaseChange {
  elementId: string;
  action: ReleaseAction;
  status: FlowStatus;
  /** The revision that becomes the release; null keeps the current one. */
  version: number | null;
  /** The pins of `version`; ignored when `version` is null. */
  pins: ScriptPin[] | null;
  user: Record<string, unknown> | null;
  now: number;
  /** Checked when the change makes the app's active schedules more; absent: no bound. */
  bounds?: AppBounds | undefined;
}

export interface Page<T> {
  total: number;
  items: T[];
}
