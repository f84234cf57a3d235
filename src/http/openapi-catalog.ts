/**
 * Words the route schemas cannot carry: per-operation summaries (numbered as in the API pages of
 * docs/); the headers are in openapi-headers.ts, the error code catalog in openapi-errors.ts. The
 * shapes themselves always come from the TypeBox schemas on the routes.
 */

export interface OperationDoc {
  tag: string;
  summary: string;
  description?: string;
}

/** Keyed by `METHOD path` with the service prefix removed. */
export const OPERATIONS: Record<string, OperationDoc> = {
  "POST /run": {
    tag: "runs",
    summary: "1. Start a flow run (async)",
    description: "Answers the run ID at once; poll GET /run/{runId}/result.",
  },
  "GET /run/{runId}/result": {
    tag: "runs",
    summary: "2. Result of a run",
    description: "Waits up to `timeout` seconds for the run to end.",
  },
  "POST /run-sync": {
    tag: "runs",
    summary: "3. Run a flow and wait",
    description: "Elapsed wait → code 28020006; the run goes on.",
  },
  "POST /run/terminate": { tag: "runs", summary: "4. Terminate runs (flows and script tasks)" },
  "POST /run/delete": { tag: "runs", summary: "5. Delete finished runs with their logs" },
  "GET /run/{runId}/artifacts": {
    tag: "runs",
    summary: "Files the run kept (`fileCleanup: keep`), per node, and those skipped",
    description: "`collected` is false until the run's files are kept, shortly after its end.",
  },
  "GET /run/{runId}/artifacts/{name}": {
    tag: "runs",
    summary: "Download one file the run kept (an attachment, never an envelope on success)",
    description:
      "The body is the file's bytes with its content type (guessed from the extension), `content-length`, `content-disposition: attachment` and `x-content-type-options: nosniff`. Failures are envelopes: 28020002 (no such run in this scope), 28090001 (no such file), code 400 (a name with `..`, an absolute path, …), code 429 (ARTIFACT_DOWNLOAD_BYTES_PER_APP or ARTIFACT_DOWNLOAD_BYTES of downloads in flight).",
  },
  "GET /monitor/flows": {
    tag: "monitor",
    summary: "6. Every flow of the scope with status, schedule, last run",
  },
  "POST /monitor/runs": { tag: "monitor", summary: "7. Runs of one element, filtered and paged" },
  "GET /monitor/run": { tag: "monitor", summary: "8. One run (any type), with node details" },
  "POST /flow/deploy": {
    tag: "flows",
    summary: "9. Deploy a flow revision (or rename the newest)",
  },
  "POST /flow/batch-deploy": { tag: "flows", summary: "10. Activate several flows" },
  "POST /flow/activate": { tag: "flows", summary: "11. Activate a flow (→ APPROVED)" },
  "POST /flow/deactivate": { tag: "flows", summary: "12. Deactivate a flow (APPROVED → OBSOLETE)" },
  "POST /flow/batch-deactivate": { tag: "flows", summary: "13. Deactivate several flows" },
  "GET /flow/list": { tag: "flows", summary: "14. Every flow with its in-process run count" },
  "POST /flow/revisions": {
    tag: "flows",
    summary: "26. A flow's revisions, newest first, the live one marked (paged)",
  },
  "POST /flow/revision": {
    tag: "flows",
    summary: "27. One revision: graph and configure exactly as deployed",
  },
  "POST /flow/revision-diff": {
    tag: "flows",
    summary: "28. Structured diff of two revisions (vertexes, edges, configure)",
  },
  "POST /flow/releases": {
    tag: "flows",
    summary: "29. A flow's release history: deploys, activations, rollbacks, deactivations (paged)",
  },
  "POST /external/{elementName}/run-sync": {
    tag: "scripts",
    summary: "15. Run a script and answer its return value (external)",
    description:
      "Success: the body is exactly the script's return value (not an envelope); `x-task-status` tells it from a failure envelope.",
  },
  "POST /external/{elementName}/run": {
    tag: "scripts",
    summary: "16. Start a script task (external)",
  },
  "POST /script/run-sync": { tag: "scripts", summary: "17. Run a script and wait (internal)" },
  "POST /script/run": { tag: "scripts", summary: "18. Start a script task (internal)" },
  "GET /script/result/{taskId}": { tag: "scripts", summary: "19. Return value of a task" },
  "GET /script/lifespan/{taskId}": {
    tag: "scripts",
    summary: "20. Return value, stdout and stderr of a task",
  },
  "POST /script/element/versions": {
    tag: "scripts",
    summary: "30. A script's versions, newest first (paged; internal)",
  },
  "POST /script/element/version": {
    tag: "scripts",
    summary: "31. One script version: .py source, or a package's files and entry (internal)",
  },
  "POST /file/batch-upload": {
    tag: "scripts",
    summary: "21. Import .py files and .zip packages as PY elements",
  },
  "POST /run/{runId}/rerun": {
    tag: "runs",
    summary: "22. Re-run a finished run (flow or script task): same parameter, same revision",
    description:
      "A new run linked to the old one (`rerunOf`); `sync: true` waits like run-sync. A script task answers `x-task-id` too.",
  },
  "POST /run/{runId}/resume": {
    tag: "runs",
    summary: "23. Resume a failed flow run from its failed node",
    description:
      "A new run of the same revision that reuses the recorded outputs of the nodes that succeeded; refused (28020008) when they were not kept.",
  },
  "POST /export": {
    tag: "flows",
    summary: "24. Export a folder or listed elements (flows, configure, the scripts they use)",
  },
  "POST /import": {
    tag: "flows",
    summary: "25. Import an export: all or nothing, idempotent, `dryRun` reports the plan",
  },
  "GET /audit": {
    tag: "audit",
    summary: "The scope's audit trail: who changed what, when, from where, with what outcome",
    description: "Newest first, filtered and paged; entries cannot be changed (docs/audit.md).",
  },
  "GET /secret": { tag: "secrets", summary: "Secrets of the scope: names and times, never values" },
  "GET /secret/{name}": {
    tag: "secrets",
    summary: "One secret's name and times (never its value)",
  },
  "PUT /secret/{name}": {
    tag: "secrets",
    summary: "Create or replace a secret (stored encrypted; docs/secrets.md)",
  },
  "DELETE /secret/{name}": {
    tag: "secrets",
    summary: "Delete a secret; refused (28060002) while a live flow references it",
  },
  "GET /webhook/secret": {
    tag: "webhooks",
    summary: "The space's webhook signing secret (made on first use)",
    description:
      "Key of the `Sluice-Signature` HMAC-SHA256 on every completion webhook (docs/webhooks.md).",
  },
  "POST /webhook/secret/rotate": {
    tag: "webhooks",
    summary: "Replace the space's webhook signing secret; answers the new one",
  },
  "GET /retention/preview": {
    tag: "operations",
    summary:
      "Dry run of run retention: per element of the scope, the finished runs a purge would delete",
    description: "Deletes nothing (docs/retention.md).",
  },
  "GET /run/{runId}/events": {
    tag: "runs",
    summary: "Live progress of a run (Server-Sent Events)",
    description:
      "text/event-stream: `state` (status and node states now), the events still kept, live `node`, `output` and `gap` events, then `end` with the recorded status; a comment line every 15 s. Past LIMIT_LIVE_STREAMS open streams of the space, or LIMIT_HELD_REQUESTS_PER_APP / LIMIT_HELD_REQUESTS waiting requests of the app / node, the envelope 429 instead. See docs/live-progress.md.",
  },
  "GET /run/{runId}/progress": {
    tag: "runs",
    summary: "Live progress of a run (polling)",
    description: "The events numbered after `after`, the node states and whether the run ended.",
  },
  "GET /script/events/{taskId}": {
    tag: "scripts",
    summary: "Live output of a script task (Server-Sent Events)",
    description: "As GET /run/{runId}/events, for a task: its stdout and stderr as printed.",
  },
  "GET /script/progress/{taskId}": {
    tag: "scripts",
    summary: "Live output of a script task (polling)",
  },
  "GET /health": { tag: "operations", summary: "Liveness: the process answers" },
  "GET /ready": {
    tag: "operations",
    summary: "Readiness: store reachable, runner up, not draining (503 otherwise)",
  },
  "GET /metrics": { tag: "operations", summary: "Prometheus metrics (text exposition format)" },
};
