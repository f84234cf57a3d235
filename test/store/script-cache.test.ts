import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { withScriptCache, withVersionCache } from "../../src/store/script-cache.ts";
import type { Scope } from "../../src/store/types.ts";

const SCOPE: Scope = { app: "app1", space: "space1" };
const OTHER: Scope = { app: "app1", space: "space2" };
const T0 = 1_700_000_000_000;

let dir: string;
let inner: OpenedStore;
let store: OpenedStore;
const queries = { find: 0, script: 0 };

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-script-cache-"));
  inner = await openStore({ dataDir: dir });
  const counted: OpenedStore = {
    ...inner,
    findElements: (scope, q) => {
      queries.find++;
      return inner.findElements(scope, q);
    },
    scriptById: (scope, id) => {
      queries.script++;
      return inner.scriptById(scope, id);
    },
  };
  store = withScriptCache(counted);
});

after(async () => {
  await inner.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function put(scope: Scope, folder: string, name: string, text: string, overwrite = false) {
  const f = await store.ensureFolder(scope, folder, T0);
  return store.putScript(
    { scope, folderId: f.id, name, kind: "module", content: Buffer.from(text), now: T0 },
    overwrite,
  );
}

const source = async (scope: Scope, name: string) => {
  const [el] = await store.findElements(scope, { type: "PY", name });
  assert.ok(el, `${name} not found`);
  const script = await store.scriptById(scope, el.id);
  return Buffer.from(script?.content ?? []).toString();
};

describe("script cache (embedded mode)", () => {
  it("answers repeated lookups without asking the database", async () => {
    await put(SCOPE, "/a", "cached", "v1");
    assert.equal(await source(SCOPE, "cached"), "v1");
    const before = { ...queries };
    assert.equal(await source(SCOPE, "cached"), "v1");
    assert.deepEqual(queries, before);
  });

  it("sees an overwrite at once", async () => {
    await put(SCOPE, "/a", "changing", "v1");
    assert.equal(await source(SCOPE, "changing"), "v1");
    const [el] = await store.findElements(SCOPE, { type: "PY", name: "changing" });
    assert.ok(el);
    assert.equal(await store.newestScriptVersion(el.id), 1);
    await put(SCOPE, "/a", "changing", "v2", true);
    assert.equal(await source(SCOPE, "changing"), "v2");
    assert.equal(await store.newestScriptVersion(el.id), 2, "the newest number is forgotten too");
  });

  it("sees a name become ambiguous when another folder gets it", async () => {
    await put(SCOPE, "/a", "twice", "one");
    assert.equal((await store.findElements(SCOPE, { type: "PY", name: "twice" })).length, 1);
    await put(SCOPE, "/b", "twice", "two");
    assert.equal((await store.findElements(SCOPE, { type: "PY", name: "twice" })).length, 2);
  });

  it("keeps scopes apart", async () => {
    await put(SCOPE, "/a", "mine", "scope one");
    assert.equal((await store.findElements(OTHER, { type: "PY", name: "mine" })).length, 0);
    await put(OTHER, "/a", "mine", "scope two");
    assert.equal(await source(OTHER, "mine"), "scope two");
    assert.equal(await source(SCOPE, "mine"), "scope one");
    const [el] = await store.findElements(SCOPE, { type: "PY", name: "mine" });
    assert.equal(await store.scriptById(OTHER, el?.id ?? ""), undefined);
  });

  it("hands out frozen elements, so no caller can change another's", async () => {
    await put(SCOPE, "/a", "frozen", "x");
    const [el] = await store.findElements(SCOPE, { type: "PY", name: "frozen" });
    assert.throws(() => {
      (el as { name: string }).name = "changed";
    }, TypeError);
  });
});

describe("numbered versions cached in any mode (withVersionCache)", () => {
  it("reads a numbered version once, and always asks for the newest", async () => {
    const reads: (number | null)[] = [];
    const counted: OpenedStore = {
      ...inner,
      scriptVersion: (id, version) => {
        reads.push(version);
        return inner.scriptVersion(id, version);
      },
    };
    const cached = withVersionCache(counted);
    const f = await inner.ensureFolder(OTHER, "/v", T0);
    const el = {
      scope: OTHER,
      folderId: f.id,
      name: "versioned",
      kind: "module" as const,
      now: T0,
    };
    await inner.putScript({ ...el, content: Buffer.from("one") }, false);
    const [found] = await inner.findElements(OTHER, { type: "PY", name: "versioned" });
    assert.ok(found);
    const text = async (v: number | null) =>
      Buffer.from((await cached.scriptVersion(found.id, v))?.content ?? []).toString();
    assert.equal(await text(1), "one");
    assert.equal(await text(1), "one");
    assert.deepEqual(reads, [1], "the second read of version 1 came from memory");
    // Another process's upload (written behind this cache) is seen as the newest at once.
    await inner.putScript({ ...el, content: Buffer.from("two") }, true);
    assert.equal(await text(null), "two");
    assert.equal(await text(2), "two");
    assert.equal(await text(1), "one");
    assert.deepEqual(reads, [1, null], "version 2, read as the newest, is known by its number");
    assert.equal(await cached.scriptVersion(found.id, 9), undefined, "unknown version");
  });
});

describe("script cache and imports", () => {
  it("a name looked up before an import that brings it is found after it", async () => {
    assert.deepEqual(await store.findElements(SCOPE, { type: "PY", name: "imported" }), []);
    await store.applyImport(
      SCOPE,
      {
        scripts: [{ path: "/imp", name: "imported", kind: "module", content: Buffer.from("i1") }],
        flows: [],
      },
      T0,
    );
    assert.equal(await source(SCOPE, "imported"), "i1");
  });
});
