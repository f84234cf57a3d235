import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { withScriptCache } from "../../src/store/script-cache.ts";
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
    await put(SCOPE, "/a", "changing", "v2", true);
    assert.equal(await source(SCOPE, "changing"), "v2");
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
