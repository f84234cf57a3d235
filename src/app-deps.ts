/** What the HTTP application is built from (app.ts): the services it answers for. */
import type { Logger } from "pino";
import type { AuditTrail } from "./audit/audit-trail.ts";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { FlowLifecycle } from "./flows/lifecycle.ts";
import type { Metrics } from "./http/metrics.ts";
import type { ProgressHub } from "./progress/hub.ts";
import type { FlowRuns } from "./runs/flow-runs.ts";
import type { Idempotency } from "./runs/idempotency.ts";
import type { Retention } from "./runs/retention.ts";
import type { DataDisk } from "./runs/run-disk.ts";
import type { FlowSchedules } from "./scheduler/flow-schedules.ts";
import type { ScriptRunner } from "./scripts/runner-types.ts";
import type { ScriptEnvs } from "./scripts/script-envs.ts";
import type { SyntaxChecker } from "./scripts/syntax-check.ts";
import type { TaskService } from "./scripts/task-service.ts";
import type { Secrets } from "./secrets/secrets.ts";
import type { ArtifactStore } from "./store/kysely-artifacts.ts";
import type { Store } from "./store/types.ts";
import type { StoredQuota } from "./stored-quota.ts";
import type { Topology } from "./topology.ts";
import type { Webhooks } from "./webhooks/index.ts";

export interface AppDeps {
  config: Config;
  store: Store;
  clock: Clock;
  logger: Logger;
  tasks: TaskService;
  runner: ScriptRunner;
  /** The sandboxed syntax check of uploads (the runner's). */
  syntax: SyntaxChecker;
  /** Builds the environments of uploads' declared dependencies (the runner's). */
  envs?: ScriptEnvs | undefined;
  lifecycle: FlowLifecycle;
  flows: FlowRuns;
  /** Secrets of a scope (docs/secrets.md); absent: no secret endpoints. */
  secrets?: Secrets | undefined;
  /** `Idempotency-Key` on the start endpoints (docs/idempotency.md). */
  idempotency: Idempotency;
  /** Cron schedules for GET /monitor/flows; absent: none shown. */
  schedules?: Pick<FlowSchedules, "schedules" | "settled"> | undefined;
  /** From createServices (fed by the run events); a bare one otherwise. */
  metrics?: Metrics;
  /** Where this process stands (services.ts): what /health shows, whether the API is served. */
  topology: Pick<Topology, "mode" | "servesApi">;
  /** Completion webhooks (docs/webhooks.md): deliveries in the run detail, the signing secret. */
  webhooks?: Pick<Webhooks, "deliveriesOf" | "secret" | "rotateSecret"> | undefined;
  /** The data directory's free space, for /health (docs/security.md, "Disk"); absent: not shown. */
  disk?: Pick<DataDisk, "state"> | undefined;
  /** The audit trail (docs/audit.md); absent: nothing is recorded, no /audit endpoint. */
  audit?: Pick<AuditTrail, "record" | "list"> | undefined;
  /** Files runs kept (docs/artifacts.md); absent: no artifact endpoints. */
  artifacts?: { store: ArtifactStore } | undefined;
  /** Run retention (docs/retention.md): its dry run; absent: no endpoint. */
  retention?: Pick<Retention, "preview"> | undefined;
  /** Live progress of runs (docs/live-progress.md); absent: no progress endpoints. */
  progress?: ProgressHub | undefined;
  /** LIMIT_STORED_BYTES_PER_APP (docs/security.md, "What an app may store"); absent: no bound. */
  stored?: StoredQuota | undefined;
}
