import assert from "node:assert/strict";
import { DF, NO_SCRIPT_FLOW } from "./flows.ts";

/** Envelope calls to a service at `url` with a tenant's headers, and a deploy of the plain flow. */
export function tenantCalls(url: string) {
  const call = async (headers: Record<string, string>, p: string, body?: unknown) => {
    const r = await fetch(url + p, {
      method: body === undefined ? "GET" : "POST",
      headers,
      signal: AbortSignal.timeout(120_000),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return (await r.json()) as { status: boolean; code: number; data: unknown };
  };
  /** Deploys and activates the 3-node flow without script as `name` in the tenant's space. */
  const deploy = async (headers: Record<string, string>, name: string) => {
    await call(headers, `${DF}/flow/deploy`, {
      elementName: name,
      revisionName: "r",
      path: "/",
      flow: NO_SCRIPT_FLOW,
      configure: {},
    });
    assert.equal(
      (await call(headers, `${DF}/flow/activate`, { elementName: name })).data,
      "APPROVED",
    );
  };
  return { call, deploy };
}
