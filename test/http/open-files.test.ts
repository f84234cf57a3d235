import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { heldRequestsWarning, openFilesLimit } from "../../src/http/open-files.ts";

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 524288               files
`;

describe("LIMIT_HELD_REQUESTS against the open-file limit (docs/live-progress.md)", () => {
  it("reads the soft limit of open files", () => {
    assert.equal(openFilesLimit(LIMITS), 1024);
    assert.equal(openFilesLimit(LIMITS.replace("1024   ", "unlimited")), undefined);
    assert.equal(openFilesLimit(""), undefined);
    // This process's own, as the service reads it at start.
    assert.ok((openFilesLimit() ?? 1) > 0);
  });

  it("warns when waiting requests could take the descriptors the service needs", () => {
    assert.match(
      heldRequestsWarning(4000, 1024) ?? "",
      /LIMIT_HELD_REQUESTS \(4000\).*1024 open files/,
    );
    assert.match(heldRequestsWarning(4000, 4500) ?? "", /ulimit -n/);
    assert.equal(heldRequestsWarning(4000, 20000), undefined);
    assert.equal(heldRequestsWarning(4000, undefined), undefined);
  });
});
