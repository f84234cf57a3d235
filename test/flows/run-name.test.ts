/* biome-ignore-all lint/suspicious/noTemplateCurlyInString: run-name placeholders are literal text */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatDate, renderRunName, unknownPlaceholders } from "../../src/flows/run-name.ts";

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
});
