import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import type { Element, ElementType, Scope, Store } from "../store/types.ts";
import { checkFolderPath, nfc } from "./paths.ts";

/** FlowElementInfo and the locating fields of every request that names an element. */
export interface Locator {
  elementName?: string | undefined;
  elementType?: string | undefined;
  folderId?: string | undefined;
  path?: string | undefined;
  elementId?: string | number | undefined;
}

/**
 * The one lookup every endpoint uses (docs/dataflow-service.md): elementId wins; otherwise name and type, in
 * the folder given by path or folderId, or across the scope when neither is given.
 */
export async function locateElement(
  store: Store,
  scope: Scope,
  loc: Locator,
  defaultType: ElementType,
): Promise<Element> {
  if (loc.folderId !== undefined && loc.path !== undefined) {
    throw badRequest("folderId and path must not both be given");
  }
  const type = (loc.elementType ?? defaultType) as ElementType;
  if (type !== "DPL" && type !== "PY")
    throw badRequest(`elementType must be DPL or PY, got "${type}"`);
  const describe = () => loc.elementName ?? String(loc.elementId);

  if (loc.elementId !== undefined && loc.elementId !== "") {
    const el = await store.elementById(scope, String(loc.elementId));
    if (!el || el.type !== type)
      throw new SluiceError(ErrorCode.ELEMENT_NOT_FOUND, [String(loc.elementId)]);
    return el;
  }
  if (!loc.elementName) throw badRequest("elementName is required");

  let folderId: string | undefined;
  if (loc.path !== undefined) {
    const problem = checkFolderPath(loc.path);
    if (problem) throw badRequest(`path ${problem}`);
    const folder = await findFolder(store, scope, loc.path);
    if (!folder)
      throw new SluiceError(ErrorCode.ELEMENT_NOT_FOUND, [`${loc.path}/${loc.elementName}`]);
    folderId = folder.id;
  } else if (loc.folderId !== undefined) {
    const folder = await store.folderById(scope, loc.folderId);
    if (!folder) throw new SluiceError(ErrorCode.FOLDER_NOT_FOUND, [loc.folderId]);
    folderId = folder.id;
  }

  const name = nfc(loc.elementName);
  let found = await store.findElements(scope, { type, name, folderId });
  // Stored before names were kept in NFC (a decomposed Hangul name was accepted as sent).
  if (found.length === 0 && name !== loc.elementName)
    found = await store.findElements(scope, { type, name: loc.elementName, folderId });
  if (found.length === 0) throw new SluiceError(ErrorCode.ELEMENT_NOT_FOUND, [describe()]);
  if (found.length > 1) throw new SluiceError(ErrorCode.ELEMENT_NOT_UNIQUE, [describe()]);
  return found[0] as Element;
}

/** A folder by its path in NFC, or as given when it was stored before paths were kept so. */
async function findFolder(store: Store, scope: Scope, path: string) {
  const canonical = nfc(path);
  const folder = await store.folderByPath(scope, canonical);
  return folder ?? (canonical !== path ? store.folderByPath(scope, path) : undefined);
}

/** Resolves the target folder of a deploy or upload: path creates missing folders, folderId must exist. */
export async function targetFolder(
  store: Store,
  scope: Scope,
  loc: { folderId?: string | undefined; path?: string | undefined },
  now: number,
): Promise<{ id: string; path: string }> {
  if (loc.folderId !== undefined && loc.path !== undefined) {
    throw badRequest("folderId and path must not both be given");
  }
  if (loc.folderId !== undefined) {
    const folder = await store.folderById(scope, loc.folderId);
    if (!folder) throw new SluiceError(ErrorCode.FOLDER_NOT_FOUND, [loc.folderId]);
    return folder;
  }
  const path = nfc(loc.path ?? "/");
  const problem = checkFolderPath(path);
  if (problem) throw badRequest(`path ${problem}`);
  return store.ensureFolder(scope, path, now);
}
