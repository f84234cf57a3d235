import type { Clock } from "../clock.ts";
import { type Locator, locateElement } from "../elements/locator.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { ReleaseAction, ScriptPin } from "../store/revision-types.ts";
import type { AppBounds, Element, FlowStatus, Scope, Store } from "../store/types.ts";
import type { Graph } from "./graph.ts";

/**
 * The script versions a revision's script nodes run once it is the release (docs/dataflow-service.md,
 * "Script pins"): for each node that names a PY element, that element's newest version now. A node
 * whose element cannot be found pins nothing (the deploy validator refuses such a revision; a
 * rollback to one fails its runs at that node, as before pins existed).
 */
export async function scriptPins(store: Store, scope: Scope, flow: unknown): Promise<ScriptPin[]> {
  const graph = flow as Partial<Graph>;
  const pins: ScriptPin[] = [];
  for (const v of graph.vertexes ?? []) {
    if (v.type !== "script") continue;
    const loc = (v.config as { element?: Locator } | undefined)?.element;
    if (!loc) continue;
    let el: Element;
    try {
      el = await locateElement(store, scope, loc, "PY");
    } catch (err) {
      if (err instanceof SluiceError) continue;
      throw err;
    }
    const version = await store.scriptVersion(el.id, null);
    if (!version) continue;
    pins.push({
      nodeId: v.id,
      elementId: el.id,
      elementName: el.name,
      path: el.path,
      version: version.version,
      sha256: version.sha256,
    });
  }
  return pins;
}

/**
 * `/flow/activate` (docs/dataflow-service.md, "Revisions and releases"): without `version`, the
 * current release (or, for an element with staged revisions only, the newest revision); with one,
 * that revision — an older one than the current release is a rollback. Always APPROVED, always
 * re-pins the newest script versions, always recorded in the release history.
 */
export async function activateRelease(
  deps: { store: Store; clock: Clock; bounds?: AppBounds | undefined },
  scope: Scope,
  user: Record<string, unknown> | null,
  el: Element,
  version: number | undefined,
): Promise<FlowStatus> {
  const { store, clock } = deps;
  const target = version ?? el.releaseVersion ?? (await newestVersion(store, el.id));
  const rev = target === null ? undefined : await store.flowRevision(el.id, target);
  if (!rev || target === null)
    throw new SluiceError(ErrorCode.REVISION_NOT_FOUND, [el.name, String(version ?? "none")]);
  const action: ReleaseAction =
    el.releaseVersion !== null && target < el.releaseVersion ? "ROLLBACK" : "ACTIVATE";
  const pins = await scriptPins(store, scope, rev.flow);
  // Removed since it was read, by a deploy past LIMIT_REVISIONS_PER_FLOW (docs/dataflow-service.md,
  // "How many revisions are kept"): nothing changed, and the answer says so.
  const changed = await store.changeRelease({
    elementId: el.id,
    action,
    status: "APPROVED",
    version: target,
    pins,
    user,
    now: clock.now(),
    bounds: deps.bounds,
  });
  if (!changed) throw new SluiceError(ErrorCode.REVISION_NOT_FOUND, [el.name, String(target)]);
  return "APPROVED";
}

async function newestVersion(store: Store, elementId: string): Promise<number | null> {
  const page = await store.flowRevisions(elementId, 1, 0);
  return page.items[0]?.version ?? null;
}
