import { LRUCache } from "lru-cache";
import type { ScriptVersion } from "./revision-types.ts";
import type { Element, ScriptElement, Store } from "./types.ts";

/**
 * Embedded mode only: script lookups (by name, and by id with the source) answered from memory.
 *
 * A run-sync of a script looks its element up by name and then loads its source: two queries
 * that cost more of the server's time than the HTTP exchange itself. A script changes only
 * through `putScript`, and in embedded mode that call goes through this very store (one process
 * owns the database), so clearing everything on it keeps the cache exact: a new script can make
 * a name ambiguous, an overwrite changes a source. In cluster mode another process may write, so
 * the topology (src/topology.ts) does not use this there.
 */
/** Sources held in memory at most, whatever their count: a package may be tens of MiB. */
const MAX_CACHED_BYTES = 64 * 1024 * 1024;

function versionLru(maxEntries: number): LRUCache<string, ScriptVersion> {
  return new LRUCache<string, ScriptVersion>({
    max: maxEntries,
    maxSize: MAX_CACHED_BYTES,
    sizeCalculation: (v) => Math.max(1, v.content.byteLength),
  });
}

/**
 * Any mode: numbered script versions answered from memory. A version, once written, never changes
 * (docs/script-service.md, "Script versions"), so this needs no invalidation when other processes
 * write: a worker loads each task's pinned source once instead of once per task. An upload may
 * remove old versions ("How many versions are kept"), so this process forgets what it holds after
 * each of its own uploads; another process may still run a removed version it already held. The
 * newest version is not cached here (another node's upload changes it).
 */
export function withVersionCache<S extends Store>(store: S, maxEntries = 256): S {
  const versions = versionLru(maxEntries);
  return {
    ...store,
    async scriptVersion(elementId, version) {
      if (version === null) {
        // The newest is read afresh, but under its number it is as fixed as any other version.
        const newest = await store.scriptVersion(elementId, null);
        if (newest) versions.set(`${elementId}\u0000${newest.version}`, Object.freeze(newest));
        return newest;
      }
      const key = `${elementId}\u0000${version}`;
      const hit = versions.get(key);
      if (hit) return hit;
      const found = await store.scriptVersion(elementId, version);
      if (found) versions.set(key, Object.freeze(found));
      return found;
    },
    async putScript(el, overwrite) {
      try {
        return await store.putScript(el, overwrite);
      } finally {
        versions.clear();
      }
    },
  };
}

export function withScriptCache<S extends Store>(store: S, maxEntries = 256): S {
  const byName = new LRUCache<string, readonly Element[]>({ max: maxEntries });
  const byId = new LRUCache<string, ScriptElement>({ max: maxEntries });
  // A numbered version never changes; the newest changes only through `putScript`.
  const versions = versionLru(maxEntries);
  const newest = new LRUCache<string, number>({ max: maxEntries });
  const remember = <V extends object>(map: LRUCache<string, V>, key: string, value: V): V => {
    map.set(key, Object.freeze(value));
    return value;
  };
  const scopeKey = (s: { app: string; space: string }) => `${s.app}\u0000${s.space}`;
  async function forgetAfter<T>(write: Promise<T>): Promise<T> {
    try {
      return await write;
    } finally {
      byName.clear();
      byId.clear();
      versions.clear();
      newest.clear();
    }
  }

  return {
    ...store,
    async findElements(scope, query) {
      if (query.type !== "PY") return store.findElements(scope, query);
      const key = `${scopeKey(scope)}\u0000${query.name}\u0000${query.folderId ?? ""}`;
      const hit = byName.get(key);
      if (hit) return [...hit];
      const found = await store.findElements(scope, query);
      // Frozen: callers share these objects, so none may change one.
      return [
        ...remember(
          byName,
          key,
          found.map((e) => Object.freeze(e)),
        ),
      ];
    },

    async scriptById(scope, id) {
      const key = `${scopeKey(scope)}\u0000${id}`;
      const hit = byId.get(key);
      if (hit) return hit;
      const script = await store.scriptById(scope, id);
      return script && remember(byId, key, script);
    },

    async scriptVersion(elementId, version) {
      const key = `${elementId}\u0000${version ?? "newest"}`;
      const hit = versions.get(key);
      if (hit) return hit;
      const found = await store.scriptVersion(elementId, version);
      return found && remember(versions, key, found);
    },

    async newestScriptVersion(elementId) {
      const hit = newest.get(elementId);
      if (hit !== undefined) return hit;
      const found = await store.newestScriptVersion(elementId);
      if (found !== undefined) newest.set(elementId, found);
      return found;
    },

    putScript: (el, overwrite) => forgetAfter(store.putScript(el, overwrite)),
    // An import writes scripts too: a name looked up before it may exist now.
    applyImport: (scope, writes, now) => forgetAfter(store.applyImport(scope, writes, now)),
  };
}
