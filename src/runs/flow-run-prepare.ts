import { LRUCache } from "lru-cache";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import { type Locator, locateElement } from "../elements/locator.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import { type Configure, type Graph, normalizeConfigure } from "../flows/graph.ts";
import { describeIssues, runParameterIssues } from "../flows/json-schema.ts";
import { renderRunName } from "../flows/run-name.ts";
import { newId } from "../ids.ts";
import type { Element, NewRun, RerunKind, Run, Scope, Store, TriggerType } from "../store/types.ts";
import { runTargets } from "../webhooks/targets.ts";
import type { WebhookTarget } from "../webhooks/types.ts";
import { checkResumable } from "./rerun.ts";

export interface StartRequest {
  scope: Scope;
  user: string | null;
  locator: Locator;
  parameter: unknown;
  inProcess: boolean;
  parentRunId?: string | null | undefined;
  trigger: TriggerType;
  /**
   * A re-run or resume of `of` (docs/dataflow-service.md, "Re-run and resume"): the element and
   * revision come from that run, not from the locator and the current release.
   */
  rerun?: { of: Run; kind: RerunKind } | undefined;
  /** The call's own completion webhook, after the flow's configured ones (docs/webhooks.md). */
  callback?: WebhookTarget | undefined;
  /** The run's ID, chosen before it is prepared (an idempotent start claims its key with it). */
  runId?: string | undefined;
}

export interface Release {
  graph: Graph;
  configure: Configure;
  version: number;
  /** Only script nodes write into a run's working directory; without one it never exists. */
  usesWorkDir: boolean;
  /** Some script node names a PY element: the run reads the revision's script pins. */
  usesScriptElements: boolean;
}

interface PreparerDeps {
  store: Store;
  config: Pick<Config, "timeZone">;
  clock: Clock;
  nodeId: string;
  /** Every change of a flow element happens in this process and calls `forget()`. */
  cacheLocators: boolean;
}

/** The state of a preparer: its dependencies and the two caches in front of the store. */
interface Preparer extends PreparerDeps {
  /**
   * Revisions never change once stored, so a parsed release is cached by element and version; a
   * worker's first batch of runs of one flow reads it once, not once per run (lru-cache's fetch
   * shares the read).
   */
  releases: LRUCache<string, Release, { elementId: string; version: number }>;
  /**
   * When every change of a flow element (deploy, activate, deactivate) happens in this process
   * (the topology says so), resolved locators are kept until `forget()`. Otherwise another node
   * may change an element at any time: every run looks it up.
   */
  located: LRUCache<string, Element>;
}

/**
 * Everything a run request is checked against before its record exists (docs/dataflow-service.md, docs/flow-graph.md):
 * the element, its approved release, the input schema, the run name.
 */
export function createRunPreparer(deps: PreparerDeps): {
  prepare(req: StartRequest, status: "QUEUED" | "STARTED"): Promise<NewRun>;
  release(elementId: string, version: number): Promise<Release>;
  /** A flow element changed (deploy, activate, deactivate): drop resolved locators. */
  forget(): void;
} {
  const p: Preparer = {
    ...deps,
    releases: new LRUCache({
      max: 1000,
      // A read under way that is evicted (a thousand others read meanwhile) still answers its
      // runs; by default lru-cache fails them with "evicted".
      ignoreFetchAbort: true,
      fetchMethod: (_key, _stale, { context }) =>
        loadRelease(deps.store, context.elementId, context.version),
    }),
    located: new LRUCache({ max: 10_000 }),
  };
  return {
    prepare: (req, status) => prepare(p, req, status),
    release: (elementId, version) => release(p, elementId, version),
    forget: () => p.located.clear(),
  };
}

async function release(p: Preparer, elementId: string, version: number): Promise<Release> {
  const key = `${elementId}:${version}`;
  const rel =
    p.releases.get(key) ?? (await p.releases.fetch(key, { context: { elementId, version } }));
  if (!rel) throw new Error(`release ${key} was not loaded`); // loadRelease answers one or throws
  return rel;
}

async function loadRelease(store: Store, elementId: string, version: number): Promise<Release> {
  const rev = await store.flowRevision(elementId, version);
  if (!rev)
    throw new SluiceError(ErrorCode.BUSINESS, [
      `revision ${version} of element ${elementId} is missing`,
    ]);
  const graph = rev.flow as Graph;
  return {
    graph,
    configure: normalizeConfigure(rev.configure),
    version,
    usesWorkDir: graph.vertexes.some((v) => v.type === "script"),
    usesScriptElements: graph.vertexes.some(
      (v) => v.type === "script" && (v.config as { element?: unknown } | undefined)?.element,
    ),
  };
}

async function locateFlow(p: Preparer, scope: Scope, loc: Locator): Promise<Element> {
  if (!p.cacheLocators) return locateElement(p.store, scope, loc, "DPL");
  const key = `${scope.app}\n${scope.space}\n${loc.elementId ?? ""}\n${loc.elementName ?? ""}\n${loc.elementType ?? ""}\n${loc.folderId ?? "\u0000"}\n${loc.path ?? "\u0000"}`;
  const hit = p.located.get(key);
  if (hit) return hit;
  const el = await locateElement(p.store, scope, loc, "DPL");
  p.located.set(key, el);
  return el;
}

/** The element a request runs: its rerun's element (by ID, in the caller's scope) or located. */
async function elementOf(p: Preparer, req: StartRequest): Promise<Element> {
  if (!req.rerun) return locateFlow(p, req.scope, req.locator);
  const el = await p.store.elementById(req.scope, req.rerun.of.elementId);
  if (!el) throw new SluiceError(ErrorCode.ELEMENT_NOT_FOUND, [req.rerun.of.elementName]);
  return el;
}

async function prepare(
  p: Preparer,
  req: StartRequest,
  status: "QUEUED" | "STARTED",
): Promise<NewRun> {
  const el = await elementOf(p, req);
  if (el.status !== "APPROVED" || el.releaseVersion == null) {
    throw new SluiceError(ErrorCode.FLOW_NOT_RUNNABLE, [el.name, el.status ?? "DRAFT"]);
  }
  // A re-run repeats the revision its run used, whatever the release is now.
  const rel = await release(p, el.id, req.rerun ? Number(req.rerun.of.version) : el.releaseVersion);
  if (req.rerun?.kind === "resume") checkResumable(req.rerun.of, rel.configure);
  const issues = runParameterIssues(rel.graph, req.parameter);
  if (issues.length > 0)
    throw badRequest(`parameter does not match the flow's input schema: ${describeIssues(issues)}`);
  return flowRunRecord(req, el, rel, status, {
    now: p.clock.now(),
    nodeId: p.nodeId,
    timeZone: p.config.timeZone,
  });
}

/** The record of a run of `el`'s release, as created (not written). */
function flowRunRecord(
  req: StartRequest,
  el: Element,
  rel: Release,
  status: "QUEUED" | "STARTED",
  at: { now: number; nodeId: string; timeZone: string },
): NewRun {
  const { now } = at;
  const id = req.runId ?? newId(now);
  const runName = renderRunName(rel.configure.runNameTemplate, {
    elementName: el.name,
    runId: id,
    version: String(rel.version),
    triggerType: req.trigger,
    user: req.user ?? "",
    parameter: req.parameter,
    now,
    timeZone: at.timeZone,
  });
  return {
    id,
    scope: req.scope,
    elementId: el.id,
    elementType: "DPL",
    elementName: el.name,
    folderId: el.folderId,
    version: String(rel.version),
    triggerType: req.parentRunId ? "API" : req.trigger,
    status,
    runName,
    runParam: JSON.stringify(req.parameter ?? null),
    initiator: req.user ? { userId: req.user } : null,
    parentRunId: req.parentRunId ?? null,
    rerunOf: req.rerun ? { runId: req.rerun.of.id, kind: req.rerun.kind } : null,
    inProcess: req.inProcess,
    nodeId: status === "STARTED" ? at.nodeId : null,
    createTime: now,
    startTime: status === "STARTED" ? now : null,
    runLimit: rel.configure.maxConcurrentRuns ?? null,
    webhooks: runTargets(rel.configure.webhooks, req.callback),
  };
}
