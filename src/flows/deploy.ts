import type { Clock } from "../clock.ts";
import { type Locator, locateElement, targetFolder } from "../elements/locator.ts";
import { checkElementName, nfc } from "../elements/paths.ts";
import { badRequest } from "../errors.ts";
import type { SyntaxChecker } from "../scripts/syntax-check.ts";
import type { SecretLookup } from "../secrets/secrets.ts";
import type { AppBounds, Element, Scope, Store } from "../store/types.ts";
import type { StoredQuota } from "../stored-quota.ts";
import { dropGraphNulls } from "./graph-nulls.ts";
import { scriptPins } from "./releases.ts";
import type { ValidationResult } from "./validation-codes.ts";
import { validationContext } from "./validation-context.ts";
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

/** What deploys and status changes write with, and the bounds they keep. */
export interface DeployDeps {
  store: Store;
  clock: Clock;
  syntax: SyntaxChecker;
  /** Deploy and activation check `${secret.NAME}` references against the scope's secrets. */
  secrets?: SecretLookup | undefined;
  /** LIMIT_REVISIONS_PER_FLOW (0: no bound; docs/dataflow-service.md, "How many revisions are kept"). */
  keepRevisions?: number | undefined;
  /** What one app may hold (docs/security.md, "What an app may hold"); absent: no bound. */
  bounds?: AppBounds | undefined;
  /** LIMIT_STORED_BYTES_PER_APP (docs/security.md, "What an app may store"); absent: no bound. */
  stored?: StoredQuota | undefined;
}

/** A deploy (docs/dataflow-service.md): a rename, or a validated new revision of the flow. */
export async function deploy(
  deps: DeployDeps,
  /** Tells the lifecycle's listeners of the deployed element. */
  notify: (element: Element) => void,
  scope: Scope,
  user: string | null,
  given: DeployRequest,
): Promise<ValidationResult[]> {
  const { store, clock } = deps;
  const req = { ...given, elementName: nfc(given.elementName) };
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

export const userObject = (user: string | null) => (user ? { userId: user } : null);

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
