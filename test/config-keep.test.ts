import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadConfig } from "../src/config.ts";

/**
 * LIMIT_REVISIONS_PER_FLOW and LIMIT_VERSIONS_PER_SCRIPT (README, configuration; docs/operations.md):
 * whole numbers, 0 for no bound; anything else stops the service at start, as the other limits do.
 */
describe("the bounds on kept revisions and script versions", () => {
  it("default to 100 each", () => {
    const { limits } = loadConfig({});
    assert.deepEqual([limits.revisionsPerFlow, limits.versionsPerScript], [100, 100]);
  });

  it("take whole numbers, 0 meaning no bound", () => {
    const c = loadConfig({ LIMIT_REVISIONS_PER_FLOW: "5", LIMIT_VERSIONS_PER_SCRIPT: "0" });
    assert.deepEqual([c.limits.revisionsPerFlow, c.limits.versionsPerScript], [5, 0]);
  });

  it("LIMIT_ELEMENTS_PER_APP and LIMIT_SCHEDULES_PER_APP default to 10,000 and 1,000, 0 no bound", () => {
    const { limits } = loadConfig({});
    assert.deepEqual([limits.elementsPerApp, limits.schedulesPerApp], [10_000, 1_000]);
    const c = loadConfig({ LIMIT_ELEMENTS_PER_APP: "0", LIMIT_SCHEDULES_PER_APP: "7" });
    assert.deepEqual([c.limits.elementsPerApp, c.limits.schedulesPerApp], [0, 7]);
  });

  for (const key of [
    "LIMIT_REVISIONS_PER_FLOW",
    "LIMIT_VERSIONS_PER_SCRIPT",
    "LIMIT_ELEMENTS_PER_APP",
    "LIMIT_SCHEDULES_PER_APP",
  ])
    it(`refuses a ${key} that is not a whole number`, () => {
      for (const bad of ["-1", "1.5", "lots", "1e12", "Infinity"])
        assert.throws(
          () => loadConfig({ [key]: bad }),
          new RegExp(`config: ${key} must be a whole number`),
          `${key}=${bad}`,
        );
    });
});
