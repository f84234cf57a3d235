import type { Clock } from "../clock.ts";
import { type Locator, locateElement, targetFolder } from "../elements/locator.ts";
import { checkElementName } from "../elements/paths.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import type { SyntaxChecker } from "../scripts/syntax-check.ts";
import type { SecretLookup } from "../secrets/secrets.ts";
import type { AppBounds, Element, FlowStatus, Scope, Store } from "../store/types.ts";
import type { StoredQuota } from "../stored-quota.ts";
import { dropGraphNulls } from "./graph-nulls.ts";
import { activateRelease as releaseRevision, scriptPins } from "./releases.ts";
import type { ValidationContext, ValidationResult } from "./validation-codes.ts";
import { validateFlow } from "./validator.ts";

export interface DeployRequest extends Locator {
  elementName: string;
  revisionName: string;
  flow?: unknown;
  configure?: unknown;
  description?: Record<string, string> | undefined;
  /** false: store a staged revision without releasing it (docs/dataflow-service.md). */
  release?: boolean | undefined;
}

export type ElementInfo = Locator & { elementName: string };

export interface BatchResult {
  element: ElementInfo;
  result: "OK" | "ERROR" | "SKIP";
  message?: string;
}

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
interface Lifecycle {
  store: Store;
  clock: Clock;
  syntax: SyntaxChecker;
  secrets?: SecretLookup | undefined;
  /** LIMIT_REVISIONS_PER_FLOW (0: no bound; docs/dataflow-service.md, "How many revisions are kept"). */
  keepRevisions?: number | undefined;
  /** What one app may hold (docs/security.md, "What an app may hold"); absent: no bound. */
  bounds?: AppBounds | undefined;
  /** LIMIT_STORED_BYTES_PER_APP (docs/security.md, "What an app may store"); absent: no bound. */
  stored?: StoredQuota | undefined;
  listeners: ((e: Element) => void)[];
}

/** Deploy, revisions and DRAFT/APPROVED/OBSOLETE exactly as docs/dataflow-service.md. */
export function createFlowLifecycle(deps: {
  store: Store;
  clock: Clock;
  syntax: SyntaxChecker;
  /** Deploy and activation check `${secret.NAME}` references against the scope's secrets. */
  secrets?: SecretLookup | undefined;
  /** Revisions a flow keeps at most (LIMIT_REVISIONS_PER_FLOW); absent or 0: every one. */
  keepRevisions?: number | undefined;
  /** LIMIT_ELEMENTS_PER_APP, LIMIT_SCHEDULES_PER_APP; absent: no bound. */
  bounds?: AppBounds | undefined;
  /** LIMIT_STORED_BYTES_PER_APP; absent: no bound. */
  stored?: StoredQuota | undefined;
}): FlowLifecycle {
  const l: Lifecycle = { ...deps, listeners: [] };
  return {
    deploy: (scope, user, req) => deploy(l, (element) => tell(l, element), scope, user, req),
    activate: async (scope, user, loc, version) =>
      (await setStatus(l, scope, user, loc, "activate", version)).next,
    deactivate: async (scope, user, loc) =>
      (await setStatus(l, scope, user, loc, "deactivate")).next,
    batchDeploy: (scope, user, locs) => batchDeploy(l, scope, user, locs),
    batchDeactivate: (scope, user, locs) => batchDeactivate(l, scope, user, locs),
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

/** One result per element, in order; an element that fails does not stop the others. */
async function eachElement(
  locs: ElementInfo[],
  one: (loc: ElementInfo) => Promise<BatchResult>,
): Promise<BatchResult[]> {
  const out: BatchResult[] = [];
  for (const loc of locs) {
    try {
      out.push(await one(loc));
    } catch (err) {
      out.push({ element: describe(loc), result: "ERROR", message: reason(err) });
    }
  }
  return out;
}

function batchDeploy(
  l: Lifecycle,
  scope: Scope,
  user: string | null,
  locs: ElementInfo[],
): Promise<BatchResult[]> {
  return eachElement(locs, (loc) =>
    activateRelease(l, scope, loc, () => setStatus(l, scope, user, loc, "activate")),
  );
}

function batchDeactivate(
  l: Lifecycle,
  scope: Scope,
  user: string | null,
  locs: ElementInfo[],
): Promise<BatchResult[]> {
  return eachElement(locs, async (loc) => {
    const { el, from } = await setStatus(l, scope, user, loc, "deactivate");
    return from === "APPROVED"
      ? { element: describe(loc, el), result: "OK" }
      : { element: describe(loc, el), result: "SKIP", message: `status is ${from}` };
  });
}

/** What the flow validator may ask about the scope it validates in (also an import's). */
export const validationContext = (
  deps: { store: Store; syntax: SyntaxChecker; secrets?: SecretLookup | undefined },
  scope: Scope,
): ValidationContext => ({
  ...(deps.secrets && {
    secretExists: (name: string) => deps.secrets?.exists(scope, name) ?? Promise.resolve(false),
  }),
  async elementExists(loc, type) {
    try {
      await locateElement(deps.store, scope, loc, type);
      return true;
    } catch (err) {
      // Not found, not unique or a malformed locator: all mean "no such element" to the validator.
      if (err instanceof SluiceError) return false;
      throw err;
    }
  },
  async checkPythonSyntax(code) {
    // The bytes the script node will run (src/runs/script-node.ts), in the task sandbox.
    const v = await deps.syntax.check([{ name: "<inline>", bytes: Buffer.from(code, "utf8") }]);
    if (v.ok) return null;
    if (v.reason === "syntax")
      return v.line !== undefined
        ? { line: v.line, message: v.message }
        : { message: `Python cannot compile the code: ${v.message}` };
    return { message: `Python code could not be checked: ${v.message}` };
  },
});

// docs/dataflow-service.md: a response describing a found element gives its elementId, folderId and path.
const describe = (loc: ElementInfo, el?: Element): ElementInfo =>
  el
    ? {
        elementName: el.name,
        elementType: "DPL",
        elementId: el.id,
        folderId: el.folderId,
        path: el.path,
      }
    : { ...loc, elementType: loc.elementType ?? "DPL" };
const reason = (err: unknown) => (err instanceof SluiceError ? err.message : String(err));

/** batch-deploy of one flow: its current release activated again, if it still validates. */
async function activateRelease(
  deps: { store: Store; syntax: SyntaxChecker; secrets?: SecretLookup | undefined },
  scope: Scope,
  loc: ElementInfo,
  activate: () => Promise<unknown>,
): Promise<BatchResult> {
  const { store } = deps;
  const el = await locateElement(store, scope, loc, "DPL");
  if (el.status === "APPROVED") {
    return { element: describe(loc, el), result: "SKIP", message: "already APPROVED" };
  }
  const rev = el.releaseVersion ? await store.flowRevision(el.id, el.releaseVersion) : undefined;
  if (!rev) throw new SluiceError(ErrorCode.BUSINESS, ["the element has no release"]);
  const problems = (await validateFlow(rev, validationContext(deps, scope))).filter(
    (r) => r.severity === 2,
  );
  if (problems.length > 0) {
    const text = problems.map((p) => `${p.nodeId}: ${p.errorMessage ?? p.errorCode}`).join("; ");
    return {
      element: describe(loc, el),
      result: "ERROR",
      message: `release no longer validates: ${text}`,
    };
  }
  await activate();
  return { element: describe(loc, el), result: "OK" };
}

/** A deploy (docs/dataflow-service.md): a rename, or a validated new revision of the flow. */
async function deploy(
  deps: Omit<Lifecycle, "listeners">,
  /** Tells the lifecycle's listeners of the deployed element. */
  notify: (element: Element) => void,
  scope: Scope,
  user: string | null,
  req: DeployRequest,
): Promise<ValidationResult[]> {
  const { store, clock } = deps;
  const nameProblem = checkElementName(req.elementName);
  if (nameProblem) throw badRequest(`elementName ${nameProblem}`);
  if ((req.elementType ?? "DPL") !== "DPL")
    throw badRequest("elementType must be DPL for a flow deploy");
  dropGraphNulls(req.flow, req.configure);
  const hasFlow = req.flow !== undefined;
  const hasConfigure = req.configure !== undefined;
  if (hasFlow !== hasConfigure)
    throw badRequest("flow and configure must be given together (or neither, to rename)");
  if (!hasFlow) {
    const el = await locateElement(store, scope, req, "DPL");
    await store.renameRevision(el.id, req.revisionName);
    return [];
  }
  const results = await validateFlow(
    { flow: req.flow, configure: req.configure },
    validationContext(deps, scope),
  );
  if (results.some((r) => r.severity === 2)) return results;
  // A new revision adds bytes; a rename (above), status changes and deactivations do not.
  const stored = [req.flow, req.configure, req.revisionName, req.description ?? null];
  const bytes = Buffer.byteLength(JSON.stringify(stored), "utf8");
  await deps.stored?.admit(scope.app, bytes, `a deploy of flow ${req.elementName}`);
  const folder = await deployTarget(store, scope, req, clock.now());
  const release = req.release ?? true;
  const { element } = await store.deployFlow({
    release,
    // A released revision pins its scripts' newest versions; a staged one pins when activated.
    pins: release ? await scriptPins(store, scope, req.flow) : null,
    scope,
    folderId: folder.id,
    name: req.elementName,
    revisionName: req.revisionName,
    flow: req.flow,
    configure: req.configure,
    description: req.description ?? null,
    user: userObject(user),
    now: clock.now(),
    keepRevisions: deps.keepRevisions ?? 0,
    bounds: deps.bounds,
  });
  notify(element);
  return results;
}

const userObject = (user: string | null) => (user ? { userId: user } : null);

/**
 * The folder a deploy writes into (docs/dataflow-service.md, "Lifecycle"): with `elementId`, the
 * element's own folder wherever it is, and a name or folder that names another element is a 400;
 * otherwise `path` (created when missing) or `folderId`.
 */
async function deployTarget(
  store: Store,
  scope: Scope,
  req: DeployRequest,
  now: number,
): Promise<{ id: string }> {
  if (req.elementId === undefined || req.elementId === "")
    return targetFolder(store, scope, req, now);
  const el = await locateElement(store, scope, { elementId: req.elementId }, "DPL");
  const id = String(req.elementId);
  if (el.name !== req.elementName)
    throw badRequest(
      `elementName "${req.elementName}" does not match element ${id}, which is named "${el.name}"`,
    );
  if (req.folderId !== undefined && req.path !== undefined)
    throw badRequest("folderId and path must not both be given");
  if (req.folderId !== undefined && req.folderId !== el.folderId)
    throw badRequest(
      `folderId "${req.folderId}" is not the folder of element ${id} (${el.folderId})`,
    );
  if (req.path !== undefined && req.path !== el.path)
    throw badRequest(`path "${req.path}" is not the folder of element ${id} (${el.path})`);
  return { id: el.folderId };
}
