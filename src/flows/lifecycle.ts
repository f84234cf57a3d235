import { type Locator, locateElement } from "../elements/locator.ts";
import type { Element, FlowStatus, Scope } from "../store/types.ts";
import { type BatchResult, batchDeactivate, batchDeploy, type ElementInfo } from "./batch.ts";
import { type DeployDeps, type DeployRequest, deploy, userObject } from "./deploy.ts";
import { activateRelease as releaseRevision } from "./releases.ts";
import type { ValidationResult } from "./validation-codes.ts";

export interface FlowLifecycle {
  deploy(scope: Scope, user: string | null, req: DeployRequest): Promise<ValidationResult[]>;
  /** With `version`, that revision becomes the release (an older one: a rollback). */
  activate(
    scope: Scope,
    user: string | null,
    loc: Locator,
    version?: number | undefined,
  ): Promise<FlowStatus>;
  deactivate(scope: Scope, user: string | null, loc: Locator): Promise<FlowStatus>;
  batchDeploy(scope: Scope, user: string | null, locs: ElementInfo[]): Promise<BatchResult[]>;
  batchDeactivate(scope: Scope, user: string | null, locs: ElementInfo[]): Promise<BatchResult[]>;
  /** Listeners learn of every change that can alter a flow's schedules (deploy, status). */
  onChange(listener: (element: Element) => void): void;
  /** Flows an import wrote (docs/export-import.md): told to the listeners like a deploy. */
  imported(scope: Scope, elementIds: readonly string[]): Promise<void>;
}

/** The state of the lifecycle: what it writes with, and who hears of each change. */
interface Lifecycle extends DeployDeps {
  listeners: ((e: Element) => void)[];
}

/** Deploy, revisions and DRAFT/APPROVED/OBSOLETE exactly as docs/dataflow-service.md. */
export function createFlowLifecycle(deps: DeployDeps): FlowLifecycle {
  const l: Lifecycle = { ...deps, listeners: [] };
  return {
    deploy: (scope, user, req) => deploy(l, (element) => tell(l, element), scope, user, req),
    activate: async (scope, user, loc, version) =>
      (await setStatus(l, scope, user, loc, "activate", version)).next,
    deactivate: async (scope, user, loc) =>
      (await setStatus(l, scope, user, loc, "deactivate")).next,
    batchDeploy: (scope, user, locs) =>
      batchDeploy(l, scope, locs, (loc) => setStatus(l, scope, user, loc, "activate")),
    batchDeactivate: (scope, user, locs) =>
      batchDeactivate(locs, (loc) => setStatus(l, scope, user, loc, "deactivate")),
    onChange(listener) {
      l.listeners.push(listener);
    },
    async imported(scope, elementIds) {
      for (const id of elementIds) await changed(l, scope, id);
    },
  };
}

function tell(l: Lifecycle, element: Element): void {
  for (const listener of l.listeners) listener(element);
}

/** Listeners get the element as stored after the change, not as the caller last saw it. */
async function changed(l: Lifecycle, scope: Scope, id: string): Promise<void> {
  const el = await l.store.elementById(scope, id);
  if (el) tell(l, el);
}

async function setStatus(
  l: Lifecycle,
  scope: Scope,
  user: string | null,
  loc: Locator,
  to: "activate" | "deactivate",
  version?: number,
): Promise<{ el: Element; from: FlowStatus; next: FlowStatus }> {
  const el = await locateElement(l.store, scope, loc, "DPL");
  const from = el.status ?? "DRAFT";
  if (to === "activate") {
    // Every activation is a release change: it re-pins script versions (docs/dataflow-service.md).
    const next = await releaseRevision(l, scope, userObject(user), el, version);
    await changed(l, scope, el.id);
    return { el, from, next };
  }
  const next: FlowStatus = from === "APPROVED" ? "OBSOLETE" : from;
  if (next !== from) {
    await l.store.changeRelease({
      elementId: el.id,
      action: "DEACTIVATE",
      status: next,
      version: null,
      pins: null,
      user: userObject(user),
      now: l.clock.now(),
    });
    await changed(l, scope, el.id);
  }
  return { el, from, next };
}
