import type { Selectable } from "kysely";
import type { ElementTable, RunTable } from "./schema.ts";
import type {
  Element,
  ElementType,
  FilesRemoved,
  FlowStatus,
  Run,
  RunStatus,
  ScriptElement,
  TriggerType,
} from "./types.ts";

/** Row ↔ domain mapping, shared by both dialects. */

/** The element columns every element query selects (joined with its folder's path). */
export const ELEMENT_COLUMNS = [
  "e.id",
  "e.app",
  "e.space",
  "e.folder_id",
  "e.type",
  "e.name",
  "e.description",
  "e.status",
  "e.kind",
  "e.release_version",
  "e.release_user",
  "e.release_time",
  "e.created_at",
  "e.updated_at",
  "f.path",
] as const;

const parseJson = <T>(text: string | null): T | null =>
  text == null ? null : (JSON.parse(text) as T);
const num = (v: number | string | null): number | null => (v == null ? null : Number(v));

export type ElementRow = Omit<Selectable<ElementTable>, "content" | "release_crons"> & {
  path: string;
};

export function toElement(row: ElementRow): Element {
  return {
    id: String(row.id),
    scope: { app: row.app, space: row.space },
    folderId: row.folder_id,
    path: row.path,
    type: row.type as ElementType,
    name: row.name,
    description: parseJson(row.description),
    status: row.status as FlowStatus | null,
    releaseVersion: row.release_version,
    releaseUser: parseJson(row.release_user),
    releaseTime: num(row.release_time),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

export function toScript(row: ElementRow & { content: Uint8Array | null }): ScriptElement {
  return {
    ...toElement(row),
    kind: row.kind === "package" ? "package" : "module",
    content: row.content ?? new Uint8Array(),
  };
}

export function toRun(
  row: Omit<Selectable<RunTable>, "notify_node" | "files_removed"> & {
    files_removed?: string | null;
  },
): Run {
  return {
    id: row.id,
    scope: { app: row.app, space: row.space },
    elementId: String(row.element_id),
    elementType: row.element_type as ElementType,
    elementName: row.element_name,
    folderId: row.folder_id,
    version: row.version,
    triggerType: row.trigger_type as TriggerType,
    status: row.status as RunStatus,
    runName: row.run_name,
    runParam: row.run_param,
    initiator: parseJson(row.initiator),
    parentRunId: row.parent_run_id,
    inProcess: Boolean(row.in_process),
    nodeId: row.node_id,
    createTime: Number(row.create_time),
    startTime: num(row.start_time),
    endTime: num(row.end_time),
    duration: num(row.duration),
    summary: row.summary,
    result: row.result,
    error: row.error,
    stdout: row.stdout,
    stderr: row.stderr,
    detail: parseJson(row.detail),
    rerunOf:
      row.rerun_of == null
        ? null
        : { runId: row.rerun_of, kind: row.rerun_kind === "resume" ? "resume" : "rerun" },
    // Only a limited run carries the field: an unlimited one reads back exactly as written.
    ...(row.run_limit == null ? {} : { runLimit: row.run_limit }),
    webhooks: parseJson(row.webhooks),
    // Only a run whose kept directory went early carries the field.
    ...(row.files_removed == null
      ? {}
      : { filesRemoved: parseJson(row.files_removed) as FilesRemoved }),
  };
}

/** Element IDs are integers; anything else (or beyond 15 digits, past int64 and exact doubles) is unknown. */
export function numericId(id: string): number | undefined {
  return /^\d{1,15}$/.test(id) ? Number(id) : undefined;
}
