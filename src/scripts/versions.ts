import { type Locator, locateElement } from "../elements/locator.ts";
import { badRequest, ErrorCode, SluiceError } from "../errors.ts";
import { pageWindow, totalPages } from "../monitor/paging.ts";
import type { ScriptVersionInfo } from "../store/revision-types.ts";
import type { Element, Scope, Store } from "../store/types.ts";
import { inspectZip } from "./zip-inspect.ts";

const elementOf = (el: Element) => ({
  elementId: el.id,
  elementName: el.name,
  path: el.path,
  folderId: el.folderId,
});

const present = (v: ScriptVersionInfo) => ({
  version: v.version,
  kind: v.kind,
  sha256: v.sha256,
  size: v.size,
  uploadedBy: v.userId,
  uploadedAt: v.createdAt,
  env: v.env,
});

/** Script versions as `/script/script/element/…` answers them (docs/script-service.md). */
export function createScriptVersionReads(store: Store) {
  const locate = (scope: Scope, loc: Locator) => {
    if ((loc.elementType ?? "PY") !== "PY") throw badRequest("elementType must be PY");
    return locateElement(store, scope, loc, "PY");
  };

  return {
    async list(scope: Scope, loc: Locator, page: { pageNo: number; pageSize: number }) {
      const { limit, offset } = pageWindow(page.pageNo, page.pageSize);
      const el = await locate(scope, loc);
      const { total, items } = await store.scriptVersions(el.id, limit, offset);
      return {
        element: elementOf(el),
        pageNo: page.pageNo,
        pageSize: page.pageSize,
        totalCount: total,
        totalPage: totalPages(total, page.pageSize),
        items: items.map(present),
      };
    },

    /** A module's source; a package's file list and entry file (its main.py). */
    async read(scope: Scope, loc: Locator, version: number | undefined) {
      const el = await locate(scope, loc);
      const v = await store.scriptVersion(el.id, version ?? null);
      if (!v)
        throw new SluiceError(ErrorCode.SCRIPT_VERSION_NOT_FOUND, [
          el.name,
          String(version ?? "newest"),
        ]);
      const base = { element: elementOf(el), ...present(v) };
      if (v.kind === "module") return { ...base, source: Buffer.from(v.content).toString("utf8") };
      // Stored packages passed this inspection at upload, so no limit refuses them here.
      const zip = await inspectZip(Buffer.from(v.content), {
        zipEntries: Number.MAX_SAFE_INTEGER,
        zipUncompressedBytes: Number.MAX_SAFE_INTEGER,
      });
      if (!zip.ok) throw new SluiceError(ErrorCode.BUSINESS, [`stored package: ${zip.message}`]);
      const entry = zip.pyFiles.find((f) => f.name === zip.entry);
      return {
        ...base,
        files: zip.files,
        entry: { name: zip.entry, source: entry?.source.toString("utf8") ?? "" },
      };
    },
  };
}
