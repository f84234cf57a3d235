/**
 * Which requests are changes, what each is called and which identifiers it names (docs/audit.md).
 * Pure: the HTTP hook (src/http/audit-hook.ts) hands in the route, params, body and answer.
 */

/** Requests that change nothing stored, or start runs: never audited ("METHOD path", no prefix). */
const NOT_CHANGES = new Set([
  "POST /run",
  "POST /run-sync",
  "POST /run/:runId/rerun",
  "POST /run/:runId/resume",
  "POST /monitor/runs",
  "POST /flow/revisions",
  "POST /flow/revision",
  "POST /flow/revision-diff",
  "POST /flow/releases",
  "POST /export",
  "POST /external/:elementName/run-sync",
  "POST /external/:elementName/run",
  "POST /script/run-sync",
  "POST /script/run",
  "POST /script/element/versions",
  "POST /script/element/version",
]);

const NAMED: Record<string, string> = {
  "POST /file/batch-upload": "upload",
  "POST /flow/deploy": "deploy",
  "POST /flow/batch-deploy": "batch-deploy",
  "POST /flow/activate": "activate",
  "POST /flow/deactivate": "deactivate",
  "POST /flow/batch-deactivate": "batch-deactivate",
  "POST /run/terminate": "terminate",
  "POST /run/delete": "delete",
  "PUT /secret/:name": "secret-put",
  "DELETE /secret/:name": "secret-delete",
  "POST /webhook/secret/rotate": "webhook-secret-rotate",
  "POST /import": "import",
};

/** The action of a token use in signature mode (docs/auth.md). */
export const TOKEN_USE = "token-use";

/** Every action name a listing may filter on (the generic `METHOD /path` of new routes aside). */
export const ACTIONS = [...new Set(Object.values(NAMED)), TOKEN_USE];

/**
 * The action of a request, or null when it is not a change. A state-changing route this table
 * does not know yet is still audited, under its method and path: a new endpoint cannot be missed.
 */
export function auditAction(method: string, path: string): string | null {
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return null;
  const key = `${method} ${path}`;
  if (NOT_CHANGES.has(key)) return null;
  return NAMED[key] ?? key;
}

/** Identifier fields a request may name: only these are kept, never a body as a whole. */
const ID_FIELDS = ["elementName", "elementId", "folderId", "path", "version", "revisionName"];
const MAX_ITEMS = 100;
const MAX_TEXT = 200;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function short(v: unknown): unknown {
  if (typeof v === "string") return v.length > MAX_TEXT ? `${v.slice(0, MAX_TEXT)}…` : v;
  return typeof v === "number" || typeof v === "boolean" ? v : undefined;
}

function ids(body: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!isRecord(body)) return out;
  for (const f of ID_FIELDS) {
    const v = short(body[f]);
    if (v !== undefined) out[f] = v;
  }
  return out;
}

function list<T>(items: unknown, pick: (item: unknown) => T): { items: T[]; more?: number } {
  const all = Array.isArray(items) ? items : [];
  const kept = all.slice(0, MAX_ITEMS).map(pick);
  return all.length > MAX_ITEMS ? { items: kept, more: all.length - MAX_ITEMS } : { items: kept };
}

/**
 * What the change named: identifiers from the route's params and body and, where the body does
 * not say (an upload, a batch's results), from the answer's data. Never a value: a secret's PUT
 * body is not read at all, a flow's graph is not kept.
 */
export function auditTarget(
  action: string,
  params: unknown,
  body: unknown,
  data: unknown,
): Record<string, unknown> {
  const target: Record<string, unknown> = {};
  if (isRecord(params)) for (const [k, v] of Object.entries(params)) target[k] = short(v);
  switch (action) {
    case "secret-put":
    case "secret-delete":
    case "webhook-secret-rotate":
      return target;
    case "terminate":
    case "delete": {
      const runIds = list(isRecord(body) ? body.runIds : [], short);
      // The answer maps each run ID to whether it was terminated or deleted.
      return {
        ...target,
        runIds: runIds.items,
        ...more(runIds),
        done: isRecord(data) ? doneOf(data) : [],
      };
    }
    case "batch-deploy":
    case "batch-deactivate": {
      const items = list(body, ids);
      return {
        ...target,
        elements: items.items,
        ...more(items),
        results: list(data, result).items,
      };
    }
    case "upload": {
      const files = list(data, (f) =>
        isRecord(f) ? { filePath: short(f.filePath), status: f.status } : {},
      );
      return { ...target, files: files.items, ...more(files) };
    }
    case "import":
      return { ...target, ...importTarget(body, data) };
    default:
      return { ...target, ...ids(body) };
  }
}

const more = (l: { more?: number }) => (l.more ? { more: l.more } : {});

function doneOf(data: Record<string, unknown>): unknown[] {
  return Object.entries(data)
    .filter(([, v]) => v === true)
    .slice(0, MAX_ITEMS)
    .map(([k]) => short(k));
}

function result(r: unknown): unknown {
  return isRecord(r) ? { ...ids(r.element), result: short(r.result) } : {};
}

function importTarget(body: unknown, data: unknown): Record<string, unknown> {
  const names = (items: unknown) =>
    list(items, (i) => (isRecord(i) ? short(i.elementName) : null)).items;
  const report = isRecord(data) ? data : {};
  return {
    dryRun: isRecord(body) && body.dryRun === true,
    created: names(report.created),
    updated: names(report.updated),
  };
}
