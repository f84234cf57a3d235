/**
 * Browser side of the two services. The scope comes from the header fields (auth mode off, or
 * signature mode through a gateway) or, when they are empty, from the `session` cookie, which
 * the browser sends by itself: the console has no credentials of its own.
 */
export const DF = "/dataflow-3-0";
export const SCRIPT = "/script";

export interface Scope {
  app: string;
  space: string;
  user: string;
}

export function loadScope(): Scope {
  const s = JSON.parse(localStorage.getItem("sluice.scope") ?? "{}") as Partial<Scope>;
  return { app: s.app ?? "", space: s.space ?? "", user: s.user ?? "" };
}

export function saveScope(scope: Scope, session: string): void {
  localStorage.setItem("sluice.scope", JSON.stringify(scope));
  if (session) {
    const value = session.replace(/^session=/, "");
    // Secure on HTTPS: the cookie is never sent in clear to the same host's plain-HTTP port.
    const secure = location.protocol === "https:" ? "; Secure" : "";
    document.cookie = `session=${value}; path=/; SameSite=Strict${secure}`;
  }
}

export class ApiError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  const scope = loadScope();
  for (const [k, v] of Object.entries(scope)) if (v) headers[k] = v;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  const env = (await res.json()) as { status: boolean; code: number | null; message: string | null; data: T };
  if (!env.status) throw new ApiError(env.code ?? 0, env.message ?? "failed");
  return env.data;
}

export interface RunInfo {
  runId: string;
  triggerType: string;
  runStatus: string;
  duration?: number;
  createTime?: number;
  startTime?: number;
  endTime?: number;
  version?: string;
  runName?: string;
  summary?: string;
  runParam?: string;
  initiator?: { userId?: string };
  elementName?: string;
  /** The run this one re-runs or resumes. */
  rerunOf?: { runId: string; kind: "rerun" | "resume" };
}

export interface FlowRecord {
  element: { elementName: string; elementType: string; path?: string; folderId?: string; elementId?: string; description?: string };
  status: string;
  revision: { version: string; name: string };
  schedule?: { name: string; crontab: string; nextRunAt?: number; lastRunAt?: number };
  lastRun?: RunInfo;
  totalRuns: number;
  summary?: string;
}

export interface RunsPage {
  totalCount: number;
  totalPage: number;
  runs: RunInfo[];
  queuedCount: number;
  startedCount: number;
  successCount: number;
  failureCount: number;
  canceledCount: number;
}

export interface NodeLog {
  nodeId: string;
  nodeType: string;
  status: string;
  startTime?: number;
  endTime?: number;
  attempts?: number;
  error?: string;
  input?: unknown;
  output?: unknown;
  stdout?: string;
  stderr?: string;
  /** A resume: the run whose recorded output this node reused (it did not run again). */
  reusedFrom?: string;
  /** Values too large to keep (LIMIT_NODE_LOG_BYTES, or the run's budget). */
  omitted?: ("input" | "output" | "stdout" | "stderr")[];
  traceback?: Traceback;
}

/** A failed script's traceback: the user's own frames, innermost last (docs/live-progress.md). */
export interface Traceback {
  type: string;
  message: string;
  frames: { file: string; line: number; function: string; code: string }[];
  text: string;
  nodeId?: string;
}

export interface Vertex {
  id: string;
  type: string;
  name?: string;
}

export interface RunDetail {
  run: RunInfo;
  elementType: string;
  parentRunId?: string;
  error?: string;
  failedNodeId?: string;
  nodes: NodeLog[];
  graph?: { vertexes: Vertex[]; edges: { source: string; target: string; when?: string }[] };
  stdout?: string;
  stderr?: string;
  result?: unknown;
  traceback?: Traceback;
  /** A FAILURE flow run whose node outputs were kept: POST /run/{runId}/resume accepts it. */
  resumable: boolean;
  /** Flow runs: the script versions its script nodes ran. */
  scripts?: ScriptUse[];
  /** Script tasks: the environment of the version it ran; null: no dependencies. */
  environment?: Environment | null;
  /** The run's kept working directory was removed (docs/security.md, "Disk"): when and why. */
  filesRemoved?: { time: number; reason: string };
}

/** A script version's environment as runs name it (docs/script-dependencies.md). */
export interface Environment {
  hash: string;
  /** `name==version`, sorted. */
  packages: string[];
}

/** POST /script/element/versions (docs/script-service.md, "Script versions"). */
export interface ScriptVersionsPage {
  element: { elementId: string; elementName: string; path: string; folderId: string };
  totalCount: number;
  totalPage: number;
  items: {
    version: number;
    kind: "module" | "package";
    sha256: string;
    size: number;
    uploadedBy: string | null;
    uploadedAt: number;
    env: (Environment & { declared: string[] }) | null;
  }[];
}

/** One completion webhook delivery of a run (GET /monitor/run `webhookDeliveries`, docs/webhooks.md). */
export interface WebhookDelivery {
  id: string;
  url: string;
  event: string;
  status: "PENDING" | "DELIVERED" | "FAILED";
  attempts: { at: number; ms: number; httpStatus?: number; error?: string }[];
  nextAttemptAt?: number;
}

export interface ScriptUse {
  nodeId: string;
  elementId: string;
  elementName: string;
  path: string;
  version: number;
  sha256: string;
  pinned: boolean;
  environment?: Environment | null;
}

export interface ElementSummary {
  elementId: string;
  elementName: string;
  path: string;
  status: string;
  releaseVersion: number | null;
}

export interface RevisionSummary {
  version: number;
  revisionName: string;
  deployedBy: string | null;
  deployedAt: number;
  releasedAt: number | null;
  status: string;
  stage: "release" | "staged" | "past";
  live: boolean;
  scriptPins: { nodeId: string; elementName: string; version: number }[] | null;
}

export interface RevisionsPage {
  element: ElementSummary;
  totalCount: number;
  totalPage: number;
  items: RevisionSummary[];
}

export interface Graph {
  vertexes: (Vertex & Record<string, unknown>)[];
  edges: ({ source: string; target: string; id?: string } & Record<string, unknown>)[];
}

export interface RevisionDetail extends RevisionSummary {
  element: ElementSummary;
  flow: Graph;
  configure: Record<string, unknown>;
}

interface Changed {
  paths: string[];
}
export interface EdgeRef {
  key: string;
  source: string;
  target: string;
}

export interface RevisionDiff {
  element: ElementSummary;
  from: RevisionSummary;
  to: RevisionSummary;
  vertexes: { added: Vertex[]; removed: Vertex[]; changed: (Vertex & Changed)[] };
  edges: { added: EdgeRef[]; removed: EdgeRef[]; changed: (EdgeRef & Changed)[] };
  configure: { changed: string[] };
}

/** GET /audit (docs/audit.md). */
export interface AuditEntry {
  id: string;
  at: number;
  user: string | null;
  address: string | null;
  method: string;
  route: string;
  action: string;
  target: Record<string, unknown>;
  outcome: string;
  code: number | null;
  durationMs: number;
}

export interface AuditPage {
  totalCount: number;
  totalPage: number;
  entries: AuditEntry[];
}
