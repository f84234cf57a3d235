/* biome-ignore-all lint/suspicious/noTemplateCurlyInString: run-name placeholders are literal text */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  formatDate,
  RUN_NAME_MAX,
  renderRunName,
  unknownPlaceholders,
} from "../../src/flows/run-name.ts";

const vars = {
  elementName: "orders",
  runId: "01J0RUN",
  version: 3,
  triggerType: "SCHEDULED",
  user: "ann",
  parameter: { a: { b: "deep" }, n: 5, obj: { x: 1 } },
  now: Date.UTC(2024, 0, 2, 3, 4, 5, 67),
};

describe("run names", () => {
  it("default template", () => {
    assert.equal(renderRunName(undefined, vars), "orders-20240102030405");
  });

  it("every placeholder", () => {
    const t =
      "${elementName}|${runId}|${version}|${triggerType}|${user}|${date:yyyy-MM-dd HH:mm:ss.SSS}|${param.a.b}|${param.n}|${param.obj}|${param.none}";
    assert.equal(
      renderRunName(t, vars),
      'orders|01J0RUN|3|SCHEDULED|ann|2024-01-02 03:04:05.067|deep|5|{"x":1}|',
    );
  });

  it("dates follow the configured zone", () => {
    assert.equal(
      renderRunName("${date:yyyyMMdd HH}", { ...vars, timeZone: "Asia/Shanghai" }),
      "20240102 11",
    );
    assert.equal(
      formatDate(Date.UTC(2023, 11, 31, 23, 0, 0), "yyyy-MM-dd HH", "Asia/Tokyo"),
      "2024-01-01 08",
    );
  });

  it("unknown placeholders are found", () => {
    assert.deepEqual(unknownPlaceholders("${elementName}${foo}${param}${date:HH}${param.x}"), [
      "foo",
      "param",
    ]);
  });
});

describe("run parameter check", async () => {
  const { runParameterIssues } = await import("../../src/flows/json-schema.ts");
  const graph = {
    vertexes: [
      {
        type: "input",
        config: {
          schema: {
            type: "object",
            required: ["orders"],
            properties: { orders: { type: "array" } },
          },
        },
      },
    ],
  };
  it("accepts a matching parameter and names the field of a mismatch", () => {
    assert.deepEqual(runParameterIssues(graph, { orders: [] }), []);
    const issues = runParameterIssues(graph, { orders: 3 });
    assert.equal(issues[0]?.instancePath, "/orders");
  });

  it("a name is cut at RUN_NAME_MAX, and placeholders past the cut are not evaluated", () => {
    let reads = 0;
    const parameter = {
      get a() {
        reads++;
        return "x".repeat(100_000);
      },
    };
    const name = renderRunName("${param.a}".repeat(256), { ...vars, parameter });
    assert.equal(name.length, RUN_NAME_MAX);
    assert.equal(reads, 1, "one placeholder filled the name: the other 255 were not rendered");
    assert.equal(renderRunName(`${"y".repeat(5000)}\${runId}`, vars).length, RUN_NAME_MAX);
    assert.equal(renderRunName("short-${runId}", vars), "short-01J0RUN");
    // A cut that would split a surrogate pair leaves the pair out.
    const emoji = renderRunName(`${"z".repeat(RUN_NAME_MAX - 1)}😀`, vars);
    assert.equal(emoji, "z".repeat(RUN_NAME_MAX - 1));
  });
});
