import type { TestServer } from "./server.ts";
import { scopeHeaders } from "./server.ts";

export const DF = "/dataflow-3-0";

/** input → transform (filter + map) → output: the no-script flow used across tests and benches. */
export const NO_SCRIPT_FLOW = {
  vertexes: [
    { id: "in", type: "input", config: { schema: { type: "object", required: ["orders"] } } },
    {
      id: "clean",
      type: "transform",
      config: {
        operators: [
          { id: "f1", type: "expr", expr: "orders" },
          { id: "f2", type: "filter", expr: "amount > 0" },
          { id: "m1", type: "map", fields: { total: "amount * qty" } },
        ],
      },
    },
    { id: "out", type: "output" },
  ],
  edges: [
    { source: "in", target: "clean" },
    { source: "clean", target: "out" },
  ],
};

export async function deployAndActivate(
  server: TestServer,
  elementName: string,
  flow: unknown,
  configure: unknown = {},
  headers: Record<string, string> = scopeHeaders(),
  path = "/flows",
): Promise<void> {
  const d = await server.call("POST", `${DF}/flow/deploy`, {
    headers,
    body: { elementName, revisionName: "r1", path, flow, configure },
  });
  if (!d.body.status || d.body.data.some((r: { severity: number }) => r.severity === 2)) {
    throw new Error(`deploy of ${elementName} failed: ${d.text}`);
  }
  const a = await server.call("POST", `${DF}/flow/activate`, {
    headers,
    body: { elementName, path },
  });
  if (a.body.data !== "APPROVED") throw new Error(`activate of ${elementName} failed: ${a.text}`);
}
