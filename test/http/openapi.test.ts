import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { ErrorCode } from "../../src/errors.ts";
import { createServices, type Services } from "../../src/services.ts";

// biome-ignore lint/suspicious/noExplicitAny: the document is arbitrary JSON.
type Doc = any;

describe("OpenAPI document", () => {
  let app: FastifyInstance;
  let services: Services;
  let doc: Doc;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-openapi-"));

  before(async () => {
    const config = loadConfig({ DATA_DIR: dataDir, SCRIPT_PREFORK: "0" });
    services = await createServices({ config, logger: pino({ level: "silent" }) });
    app = await buildApp(services);
    const res = await app.inject({ method: "GET", url: "/openapi.json" });
    assert.equal(res.statusCode, 200);
    doc = res.json();
  });
  after(async () => {
    await app.close();
    await services.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("is a valid OpenAPI 3.1 document", async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    assert.equal(validator.version, "3.1");
    assert.deepEqual(result.errors, undefined);
    assert.equal(result.valid, true);
  });

  it("lists every registered route that is not deliberately hidden", () => {
    const visible = app.routeList.filter((r) => !r.hidden && r.method !== "HEAD");
    assert.ok(visible.length >= 24, `only ${visible.length} routes seen`);
    for (const r of visible) {
      const p = r.url.replace(/:(\w+)/g, "{$1}");
      assert.ok(
        doc.paths[p]?.[r.method.toLowerCase()],
        `${r.method} ${p} is missing from the document`,
      );
    }
  });

  it("has all 21 endpoints of the API and the root endpoints", () => {
    const expected = [
      "post /dataflow-3-0/run",
      "get /dataflow-3-0/run/{runId}/result",
      "post /dataflow-3-0/run-sync",
      "post /dataflow-3-0/run/terminate",
      "post /dataflow-3-0/run/delete",
      "get /dataflow-3-0/monitor/flows",
      "post /dataflow-3-0/monitor/runs",
      "get /dataflow-3-0/monitor/run",
      "post /dataflow-3-0/flow/deploy",
      "post /dataflow-3-0/flow/batch-deploy",
      "post /dataflow-3-0/flow/activate",
      "post /dataflow-3-0/flow/deactivate",
      "post /dataflow-3-0/flow/batch-deactivate",
      "get /dataflow-3-0/flow/list",
      "post /script/external/{elementName}/run-sync",
      "post /script/external/{elementName}/run",
      "post /script/script/run-sync",
      "post /script/script/run",
      "get /script/script/result/{taskId}",
      "get /script/script/lifespan/{taskId}",
      "post /script/file/batch-upload",
      "get /health",
      "get /ready",
      "get /metrics",
    ];
    for (const e of expected) {
      const [method, p] = e.split(" ") as [string, string];
      const op = doc.paths[p]?.[method];
      assert.ok(op, `${e} missing`);
      assert.ok(op.summary, `${e} has no summary`);
    }
  });

  it("documents context headers, the session cookie and response headers", () => {
    const run = doc.paths["/dataflow-3-0/run"].post;
    const names = run.parameters.map((p: Doc) => `${p.in}:${p.name}`);
    for (const n of [
      "header:app",
      "header:space",
      "header:user",
      "header:language",
      "header:token",
      "cookie:session",
    ]) {
      assert.ok(names.includes(n), `${n} missing on POST /run`);
    }
    assert.ok(run.responses["200"].headers["x-run-id"]);
    assert.ok(run.responses["200"].headers["x-request-id"]);
    const ext = doc.paths["/script/external/{elementName}/run-sync"].post;
    assert.ok(ext.responses["200"].headers["x-task-id"]);
    assert.ok(ext.responses["200"].headers["x-task-status"]);
    const upload = doc.paths["/script/file/batch-upload"].post;
    assert.ok(upload.requestBody.content["multipart/form-data"].schema.properties.batchFile);
  });

  it("carries the whole error code catalog of src/errors.ts", () => {
    const codes = doc.components.schemas.ErrorCode.enum as number[];
    for (const code of Object.values(ErrorCode))
      assert.ok(codes.includes(code), `code ${code} missing`);
    assert.match(doc.info.description, /28030005/);
  });

  it("serves the interactive docs page and its assets locally", async () => {
    const page = await app.inject({ method: "GET", url: "/docs" });
    assert.equal(page.statusCode, 200);
    assert.doesNotMatch(page.body, /https?:\/\/(?!127\.0\.0\.1|localhost)[^"']*\.(js|css)/);
    const js = await app.inject({ method: "GET", url: "/docs/static/swagger-ui-bundle.js" });
    assert.equal(js.statusCode, 200);
  });
});
