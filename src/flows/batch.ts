import { type Locator, locateElement } from "../elements/locator.ts";
import { ErrorCode, SluiceError } from "../errors.ts";
import type { SyntaxChecker } from "../scripts/syntax-check.ts";
import type { SecretLookup } from "../secrets/secrets.ts";
import type { Element, FlowStatus, Scope, Store } from "../store/types.ts";
import { validationContext } from "./validation-context.ts";
import { validateFlow } from "./validator.ts";

export type ElementInfo = Locator & { elementName: string };

export interface BatchResult {
  element: ElementInfo;
  result: "OK" | "ERROR" | "SKIP";
  message?: string;
}

/** batch-deploy: each flow's current release activated again by `activate`, if it still validates. */
export function batchDeploy(
  deps: { store: Store; syntax: SyntaxChecker; secrets?: SecretLookup | undefined },
  scope: Scope,
  locs: ElementInfo[],
  activate: (loc: ElementInfo) => Promise<unknown>,
): Promise<BatchResult[]> {
  return eachElement(locs, (loc) => activateRelease(deps, scope, loc, () => activate(loc)));
}

/** batch-deactivate: `deactivate` answers the status each flow had; only an APPROVED one changes. */
export function batchDeactivate(
  locs: ElementInfo[],
  deactivate: (loc: ElementInfo) => Promise<{ el: Element; from: FlowStatus }>,
): Promise<BatchResult[]> {
  return eachElement(locs, async (loc) => {
    const { el, from } = await deactivate(loc);
    return from === "APPROVED"
      ? { element: describe(loc, el), result: "OK" }
      : { element: describe(loc, el), result: "SKIP", message: `status is ${from}` };
  });
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
