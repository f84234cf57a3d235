import { type Locator, locateElement } from "../elements/locator.ts";
import { SluiceError } from "../errors.ts";
import type { Element, ElementType, Scope, Store } from "../store/types.ts";

/**
 * The elements a flow revision refers to (docs/export-import.md): script nodes (PY), sub-flow
 * nodes (DPL) and the custom error handler (its elementType, else PY or DPL).
 */
export interface Ref {
  type: ElementType | null;
  loc: Locator;
  /** Replaces the locator in the revision it was found in. */
  set(loc: Locator): void;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

export function refsOf(flow: unknown, configure: unknown): Ref[] {
  const refs: Ref[] = [];
  const add = (holder: Record<string, unknown>, type: ElementType | null) => {
    const loc = holder.element;
    if (isRecord(loc))
      refs.push({
        type:
          type ?? (loc.elementType === "PY" || loc.elementType === "DPL" ? loc.elementType : null),
        loc: loc as Locator,
        set: (next) => {
          holder.element = next;
        },
      });
  };
  const vertexes = isRecord(flow) && Array.isArray(flow.vertexes) ? flow.vertexes : [];
  for (const v of vertexes) {
    if (!isRecord(v) || !isRecord(v.config)) continue;
    if (v.type === "script") add(v.config, "PY");
    if (v.type === "subflow") add(v.config, "DPL");
  }
  const handlers = isRecord(configure) ? configure.errorHandlers : undefined;
  if (isRecord(handlers) && isRecord(handlers.custom)) add(handlers.custom, null);
  return refs;
}

/** The element a reference names in `scope`, or undefined (not found, not unique, malformed). */
export async function resolveRef(
  store: Store,
  scope: Scope,
  ref: Pick<Ref, "type" | "loc">,
): Promise<Element | undefined> {
  for (const type of ref.type ? [ref.type] : (["PY", "DPL"] as const)) {
    try {
      return await locateElement(store, scope, ref.loc, type);
    } catch (err) {
      if (!(err instanceof SluiceError)) throw err;
    }
  }
  return undefined;
}

/**
 * A revision's graph and configure as another installation can read them: a locator by
 * `elementId` or `folderId` (IDs of this installation) becomes one by name and folder path.
 * Export writes this form, and import compares a target's revisions in the same form, so a
 * re-import of what it wrote finds it equal. `onRef` hears every element found.
 */
export async function portable(
  store: Store,
  scope: Scope,
  rev: { flow: unknown; configure: unknown },
  onRef?: (el: Element) => void,
): Promise<{ flow: Record<string, unknown>; configure: Record<string, unknown> }> {
  const flow = structuredClone(isRecord(rev.flow) ? rev.flow : {});
  const configure = structuredClone(isRecord(rev.configure) ? rev.configure : {});
  for (const ref of refsOf(flow, configure)) {
    const el = await resolveRef(store, scope, ref);
    if (!el) continue;
    onRef?.(el);
    if (ref.loc.elementId !== undefined || ref.loc.folderId !== undefined)
      ref.set({
        elementName: el.name,
        ...(ref.loc.elementType !== undefined ? { elementType: ref.loc.elementType } : {}),
        path: el.path,
      });
  }
  return { flow, configure };
}
