import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyInstance } from "fastify";
import { Type } from "typebox";
import { locateElement } from "../elements/locator.ts";
import { ErrorCode, languageHeader, SluiceError } from "../errors.ts";
import { taskEnvironment } from "../monitor/environment.ts";
import { parseRunsFilter } from "../monitor/filter.ts";
import { totalPages } from "../monitor/paging.ts";
import {
  flowListItem,
  flowOverview,
  runDisplay,
  runInfo,
  type ScheduleOverview,
} from "../monitor/present.ts";
import { ErrorHandlerResultSchema } from "../runs/error-handlers/schema.ts";
import { recordedTraceback } from "../scripts/traceback.ts";
import type { Store } from "../store/types.ts";
import type { WebhookDelivery } from "../webhooks/types.ts";
import { scopeOf } from "./context.ts";
import { Envelope, ok } from "./envelope.ts";
import { RunEnvironmentSchema } from "./environment-schema.ts";
import {
  FilesRemovedSchema,
  FlowElementInfoWithInProcess,
  FlowOverviewRecord,
  MonitorRunQuery,
  MonitorRunResp,
  PagedRunsFilter,
  RunDisplayResp,
} from "./monitor-schemas.ts";
import { TracebackSchema } from "./traceback-schema.ts";
import { WebhookDeliverySchema } from "./webhook-schemas.ts";

export interface MonitorRouteOptions {
  store: Store;
  /** An element's schedules, from the scheduler when one is wired; absent means none. */
  schedules?: ((elementId: string) => ScheduleOverview[]) | undefined;
  /**
   * Resolves once this node's own flow changes (deploy, activate, import) reached its scheduler,
   * so that a flow list read after them shows their schedules.
   */
  schedulesSettled?: (() => Promise<void>) | undefined;
  /** A run's webhook deliveries (docs/webhooks.md); absent: none shown. */
  deliveries?: ((runId: string) => Promise<WebhookDelivery[]> | WebhookDelivery[]) | undefined;
}

/** The raw `language` header: descriptions may carry locales beyond the two message languages. */
/** One run, plus the outcomes of its error handlers and webhook deliveries when there are any. */
const RunDisplayWithHandlers = Type.Object({
  ...RunDisplayResp.properties,
  errorHandlerResults: Type.Optional(Type.Array(ErrorHandlerResultSchema)),
  webhookDeliveries: Type.Optional(Type.Array(WebhookDeliverySchema)),
  traceback: Type.Optional(TracebackSchema),
  /** Script tasks only (docs/script-dependencies.md); a flow run names one per node in run-detail. */
  environment: Type.Optional(RunEnvironmentSchema),
  filesRemoved: Type.Optional(FilesRemovedSchema),
});

/** Endpoints 6–8 and 14: monitor flows, runs and one run; the flow list. */
export async function monitorRoutes(
  fastify: FastifyInstance,
  opts: MonitorRouteOptions,
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { store } = opts;

  app.get(
    "/monitor/flows",
    {
      config: { access: "context" },
      schema: { response: { 200: Envelope(Type.Array(FlowOverviewRecord)) } },
    },
    async (req) => {
      const language = languageHeader(req.headers.language);
      const [rows] = await Promise.all([
        store.monitorFlows(scopeOf(req)),
        opts.schedulesSettled?.(),
      ]);
      return ok(rows.map((r) => flowOverview(r, language, opts.schedules?.(r.element.id) ?? [])));
    },
  );

  app.post(
    "/monitor/runs",
    {
      config: { access: "context" },
      schema: { body: PagedRunsFilter, response: { 200: Envelope(MonitorRunResp) } },
    },
    async (req) => {
      const b = req.body;
      const scope = scopeOf(req);
      const query = parseRunsFilter(b);
      const el = await locateElement(store, scope, b, "DPL");
      const page = await store.monitorRuns(scope, el.id, query);
      return ok({
        totalCount: page.totalCount,
        totalPage: totalPages(page.totalCount, b.pageSize),
        runs: page.runs.map(runInfo),
        queuedCount: page.counts.QUEUED,
        startedCount: page.counts.STARTED,
        successCount: page.counts.SUCCESS,
        failureCount: page.counts.FAILURE,
        canceledCount: page.counts.CANCELED,
      });
    },
  );

  app.get(
    "/monitor/run",
    {
      config: { access: "contextEnv" },
      schema: { querystring: MonitorRunQuery, response: { 200: Envelope(RunDisplayWithHandlers) } },
    },
    async (req) => {
      const run = await store.getRun(req.ctx.scope, req.query.runId);
      if (!run) throw new SluiceError(ErrorCode.RUN_NOT_FOUND, [req.query.runId]);
      const element = await store.elementById(run.scope, run.elementId);
      const handlerResults = await store.errorHandlerResults(run.id);
      const deliveries = (await opts.deliveries?.(run.id)) ?? [];
      const traceback = recordedTraceback(run.detail);
      const environment = await taskEnvironment(store, run);
      return ok({
        ...runDisplay(run, element, languageHeader(req.headers.language)),
        ...(handlerResults.length > 0 ? { errorHandlerResults: handlerResults } : {}),
        ...(deliveries.length > 0 ? { webhookDeliveries: deliveries } : {}),
        ...(traceback ? { traceback } : {}),
        ...(environment !== undefined ? { environment } : {}),
        ...(run.filesRemoved ? { filesRemoved: run.filesRemoved } : {}),
      });
    },
  );

  app.get(
    "/flow/list",
    {
      config: { access: "list" },
      schema: { response: { 200: Envelope(Type.Array(FlowElementInfoWithInProcess)) } },
    },
    async (req) => {
      const scope = req.ctx.scope;
      return ok((await store.listFlows(scope)).map((row) => flowListItem(row, scope === null)));
    },
  );
}
