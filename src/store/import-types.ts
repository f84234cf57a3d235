import type { AppBounds, FlowStatus } from "./model.ts";
import type { FlowRevision } from "./revision-types.ts";

/** A flow an import writes (docs/export-import.md). */
export interface ImportFlow {
  path: string;
  name: string;
  /** An element that exists: only its missing revisions (and its release) are written. */
  elementId: string | null;
  /** A new element: its status and description. */
  status: FlowStatus;
  description: Record<string, string> | null;
  revisions: Omit<FlowRevision, "elementId" | "releasedAt" | "scriptPins">[];
  /** The release to set; null leaves it. */
  releaseVersion: number | null;
  /** Recorded as the release user when the release moves. */
  user: Record<string, unknown> | null;
}

/** Everything one import writes, committed together or not at all. */
export interface ImportWrites {
  scripts: { path: string; name: string; kind: "module" | "package"; content: Uint8Array }[];
  flows: ImportFlow[];
  /** Who imports: recorded with the script versions the import creates. */
  userId?: string | null;
  /** Checked once everything is written (28010006, 28010007); absent: no bound. */
  bounds?: AppBounds | undefined;
}
