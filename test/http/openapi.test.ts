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

  it("says every optional JSON body field accepts null, and required ones do not", () => {
    const acceptsNull = (schema: Doc): boolean =>
      schema.type === undefined && schema.anyOf === undefined
        ? true // free-form (a run's parameter): any JSON value, null included
        : [schema.type].flat().includes("null") ||
          (schema.anyOf ?? []).some((s: Doc) => s.type === "null");
    let optional = 0;
    const walk = (schema: Doc, where: string): void => {
      if (schema.items) walk(schema.items, `${where}[]`);
      for (const [key, prop] of Object.entries<Doc>(schema.properties ?? {})) {
        const required = (schema.required ?? []).includes(key);
        if (!required) optional++;
        assert.equal(acceptsNull(prop), !required, `${where}.${key}: ${JSON.stringify(prop)}`);
        walk(prop.anyOf?.find((s: Doc) => s.type !== "null") ?? prop, `${where}.${key}`);
      }
    };
    for (const [p, item] of Object.entries<Doc>(doc.paths)) {
      for (const [method, op] of Object.entries<Doc>(item)) {
        const json = op.requestBody?.content?.["application/json"]?.schema;
        if (json) walk(json, `${method} ${p}`);
      }
    }
    assert.ok(optional >= 60, `only ${optional} optional body fields seen`);
    const colFilter =
      doc.paths["/dataflow-3-0/monitor/runs"].post.requestBody.content["application/json"].schema
        .properties.colFilters;
    assert.deepEqual(colFilter.type, ["array", "null"]);
    assert.deepEqual(colFilter.items.properties.from.type, ["integer", "null"]);
  });

  it("leaves the schemas the server validates with alone: a null is still a field left out", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/dataflow-3-0/run-sync",
      headers: { app: "app1", space: "space1", user: "alice" },
      payload: { elementName: "nothing", folderId: null, path: "/p", timeout: null },
    });
    assert.equal(res.json().code, ErrorCode.ELEMENT_NOT_FOUND, res.body);
  });

  it("says query and form booleans accept true/false/1/0 in any case, and empty values are absent", () => {
    const pattern = (schema: Doc) => new RegExp(schema.pattern);
    const ext = doc.paths["/script/external/{elementName}/run-sync"].post;
    const query = Object.fromEntries(
      ext.parameters.filter((p: Doc) => p.in === "query").map((p: Doc) => [p.name, p]),
    );
    for (const name of ["terminateOnTimeout", "compressedFlag"]) {
      const p = query[name];
      assert.deepEqual(p.schema.type, ["boolean", "string"], name);
      for (const ok of ["true", "FALSE", "True", "1", "0"]) assert.match(ok, pattern(p.schema));
      for (const bad of ["yes", "on", "10", ""]) assert.doesNotMatch(bad, pattern(p.schema));
      assert.match(p.description, /true, false, 1 or 0 in any letter case/);
    }
    for (const p of ext.parameters.filter((x: Doc) => x.in === "query"))
      assert.match(p.description, /empty value is the same as leaving the parameter out/, p.name);
    const form =
      doc.paths["/script/file/batch-upload"].post.requestBody.content["multipart/form-data"].schema;
    assert.deepEqual(form.properties.overwrite.type, ["boolean", "string"]);
    assert.match(form.properties.folderId.description, /empty value/);
    const runSync =
      doc.paths["/dataflow-3-0/run-sync"].post.requestBody.content["application/json"].schema;
    assert.deepEqual(runSync.properties.inProcess.type, ["boolean", "string", "null"]);
  });

  it("says an empty JSON body is no body where the body is optional", () => {
    for (const p of [
      "/script/external/{elementName}/run-sync",
      "/script/external/{elementName}/run",
    ]) {
      const body = doc.paths[p].post.requestBody;
      assert.equal(body.required, false, p);
      assert.match(body.description, /an empty body sent as `application\/json`, are the same/);
    }
    const run = doc.paths["/dataflow-3-0/run"].post.requestBody;
    assert.equal(run.required, true);
    assert.match(run.description, /`body is required`/);
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
