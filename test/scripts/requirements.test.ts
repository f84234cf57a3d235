import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  normalizeName,
  parseInlineMetadata,
  parseRequirementsTxt,
  requirementName,
} from "../../src/scripts/requirements.ts";

describe("PEP 723 script blocks", () => {
  it("reads dependencies across lines, with comments, and skips [tool] tables", () => {
    const src = [
      "# /// script",
      '# requires-python = ">=3.9"',
      "# dependencies = [",
      '#   "requests>=2.31,<3",  # http',
      "#   'Pandas[excel] == 2.2.0',",
      "#   \"tomli; python_version < '3.11'\",",
      "# ]",
      "#",
      "# [tool.sluice]",
      "# anything = goes",
      "# ///",
      "def main(): pass",
    ].join("\n");
    assert.deepEqual(parseInlineMetadata(src, "m.py"), {
      requirements: [
        "requests>=2.31,<3",
        "Pandas[excel] == 2.2.0",
        "tomli; python_version < '3.11'",
      ],
    });
  });

  it("no block: no requirements; other block types are not ours", () => {
    assert.deepEqual(parseInlineMetadata("def main(): pass\n", "m.py"), { requirements: [] });
    assert.deepEqual(parseInlineMetadata("# /// pyproject\n# x = 1\n# ///\n", "m.py"), {
      requirements: [],
    });
  });

  it("refuses what it cannot read exactly, naming the line", () => {
    const bad: [string, RegExp][] = [
      ["# /// script\n# dependencies = []", /m.py line 1: .*not closed by "# \/\/\/"/],
      ["# /// script\nx = 1\n# ///\n", /m.py line 2: .*not a comment/],
      ["# /// script\n# dependencies = 'x'\n# ///\n", /line 2: dependencies must be an array/],
      ['# /// script\n# dependencies = ["a", 3]\n# ///\n', /array of strings/],
      ["# /// script\n# requires-python = 3\n# ///\n", /requires-python must be a string/],
      ["# /// script\n# [project]\n# ///\n", /only \[tool/],
      ['# /// script\n# dependencies = ["-e ."]\n# ///\n', /not a requirement/],
      ['# /// script\n# dependencies = ["a", "A"]\n# ///\n', /"a" is required more than once/],
      [
        "# /// script\n# dependencies = []\n# ///\n# /// script\n# dependencies = []\n# ///\n",
        /line 4: a second/,
      ],
    ];
    for (const [src, message] of bad) {
      const d = parseInlineMetadata(src, "m.py");
      assert.ok("problem" in d, src);
      assert.match(d.problem, message, src);
    }
  });
});

describe("requirements.txt", () => {
  it("reads requirements, comments and continuations", () => {
    const text = "# top\nrequests==2.31.0 # pinned\n\nfoo-bar \\\n  >=1.0\n";
    assert.deepEqual(parseRequirementsTxt(text), {
      requirements: ["requests==2.31.0", "foo-bar   >=1.0"],
    });
  });

  it("refuses pip options, URLs and paths", () => {
    for (const line of [
      "-r other.txt",
      "--extra-index-url https://x",
      "-e .",
      "pkg @ https://x/y.whl",
      "./local",
    ]) {
      const d = parseRequirementsTxt(`ok\n${line}\n`);
      assert.ok("problem" in d, line);
      assert.match(d.problem, /requirements.txt line 2/, line);
    }
  });

  it("normalizes names as pip compares them", () => {
    assert.equal(normalizeName("Foo_Bar.baz"), "foo-bar-baz");
    assert.equal(requirementName("Foo_Bar[x]>=1"), "foo-bar");
  });
});

/**
 * Parsed on the event loop at upload, so a large declaration must be read in linear time (before,
 * a 200,000-line continuation took 11 s and a 100,000-line dependencies array 58 s, in which the
 * service answered nothing). These check the answers on such inputs; they assert no time (tests
 * here await results, never the clock), but a quadratic parser makes this file take minutes.
 */
describe("large declarations", () => {
  it("a requirements.txt of 200,000 continued lines is refused", () => {
    const value = parseRequirementsTxt("a\\\n".repeat(200_000));
    assert.match((value as { problem: string }).problem, /line 1: a requirement is longer than/);
  });

  it("a script block whose dependencies array has 100,000 lines is refused", () => {
    const src = `# /// script\n# dependencies = [\n${'#  "a",\n'.repeat(100_000)}# ]\n# ///\n`;
    const value = parseInlineMetadata(src, "big.py");
    assert.match((value as { problem: string }).problem, /big.py .*more than 200 requirements/);
  });

  it("a script block with an array that never closes is refused", () => {
    const src = `# /// script\n# dependencies = [\n${"# \n".repeat(200_000)}# ///\n`;
    const value = parseInlineMetadata(src, "open.py");
    assert.match((value as { problem: string }).problem, /open.py line 2: /);
  });
});
