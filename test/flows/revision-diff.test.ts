import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { changedPaths, diffRevisions } from "../../src/flows/revision-diff.ts";

describe("revision diff (docs/dataflow-service.md, 'Revision diff')", () => {
  it("names each changed leaf as a JSON Pointer, escaping ~ and /", () => {
    assert.deepEqual(
      changedPaths({ a: { "x/y": 1, "m~n": [1, 2] }, b: 1 }, { a: { "x/y": 2, "m~n": [1, 2, 3] } }),
      ["/a/x~1y", "/a/m~0n/2", "/b"],
    );
    assert.deepEqual(changedPaths({ a: [1] }, { a: { 0: 1 } }), ["/a"]);
    assert.deepEqual(changedPaths(1, 2), [""]);
    assert.deepEqual(changedPaths({ a: null }, { a: null }), []);
  });

  it("matches edges by id, else by source->target with #n for repeats", () => {
    const from = {
      flow: {
        vertexes: [{ id: "a", type: "input" }],
        edges: [
          { id: "e1", source: "a", target: "b" },
          { source: "a", target: "c" },
          { source: "a", target: "c", when: "x" },
        ],
      },
      configure: {},
    };
    const to = {
      flow: {
        vertexes: [{ id: "a", type: "input", name: "A" }],
        edges: [
          { id: "e1", source: "a", target: "d" },
          { source: "a", target: "c" },
        ],
      },
      configure: {},
    };
    const d = diffRevisions(from, to);
    assert.deepEqual(d.vertexes.changed, [{ id: "a", type: "input", paths: ["/name"] }]);
    assert.deepEqual(d.edges.changed, [
      { key: "e1", source: "a", target: "d", paths: ["/target"] },
    ]);
    assert.deepEqual(d.edges.removed, [{ key: "a->c#2", source: "a", target: "c" }]);
    assert.deepEqual(d.edges.added, []);
  });
});
