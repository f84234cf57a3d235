import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { signToken } from "../../src/auth/tokens.ts";
import { DF, deployAndActivate, NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { rawRequest } from "../helpers/raw-http.ts";
import { startServer, TEST_MODE, type TestServer } from "../helpers/server.ts";

/**
 * Scope headers outside ASCII (docs/auth.md, "Headers per endpoint"): Node reads header bytes as
 * Latin-1, so a user "张三" sent as UTF-8 (Go's net/http, a gateway passing the name through) was
 * stored as "å¼ ä¸\x89", and in signature mode its token, signed over the UTF-8 name, was a 401.
 * A value whose bytes are UTF-8 is read as UTF-8; one that is not (Python's requests writes a
 * `str` header as Latin-1: "Müller" as one byte 0xfc) stays Latin-1. In both modes.
 */

const SECRET = "utf8-secret";
/** The head goes as bytes, in the body argument: a string would be written as UTF-8 again. */
const CRLF = Buffer.from("\r\n");

describe(`scope headers outside ASCII (${TEST_MODE})`, () => {
  let server: TestServer;
  let signed: TestServer;
  before(async () => {
    server = await startServer();
    signed = await startServer({ AUTH_MODE: "signature", AUTH_APP_SECRETS: `app1=${SECRET}` });
  });
  after(async () => {
    await server?.close();
    await signed?.close();
  });

  /** A run-sync with the head's header values written as the given bytes. */
  const run = async (target: TestServer, headers: Record<string, Buffer | string>) => {
    const body = Buffer.from(JSON.stringify({ elementName: "u8", parameter: { orders: [] } }));
    const lines = Object.entries({
      host: "127.0.0.1",
      "content-type": "application/json",
      "content-length": String(body.length),
      ...headers,
    }).map(([k, v]) => Buffer.concat([Buffer.from(`${k}: `), Buffer.from(v), Buffer.from("\r\n")]));
    const head = Buffer.concat([Buffer.from(`POST ${DF}/run-sync HTTP/1.1\r\n`), ...lines]);
    const port = Number(new URL(target.url).port);
    const a = await rawRequest(port, "", Buffer.concat([head, CRLF, body]), 15_000);
    const answer = JSON.parse(a.body.toString()) as { code: number; message: string };
    return { answer, runId: a.headers["x-run-id"] };
  };
  const initiator = async (target: TestServer, runId: string | undefined) =>
    (await target.services.store.getRun(null, runId ?? ""))?.initiator;

  it("a UTF-8 user, app and space are read as sent; a Latin-1 user stays Latin-1", async () => {
    const scope = { app: "应用", space: "空间", user: "张三" };
    // Deployed through raw bytes too: fetch cannot send a header outside Latin-1.
    const utf8 = Object.fromEntries(Object.entries(scope).map(([k, v]) => [k, Buffer.from(v)]));
    const deployBody = JSON.stringify({
      elementName: "u8",
      revisionName: "r1",
      path: "/u8",
      flow: NO_SCRIPT_FLOW,
      configure: {},
    });
    const port = Number(new URL(server.url).port);
    const rawCall = async (path: string, body: string) => {
      const lines = Object.entries(utf8).map(([k, v]) =>
        Buffer.concat([Buffer.from(`${k}: `), v, Buffer.from("\r\n")]),
      );
      const head = Buffer.concat([
        Buffer.from(
          `POST ${DF}${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`,
        ),
        ...lines,
      ]);
      const a = await rawRequest(port, "", Buffer.concat([head, CRLF, Buffer.from(body)]), 15_000);
      return JSON.parse(a.body.toString()) as { code: number; data: unknown };
    };
    assert.equal((await rawCall("/flow/deploy", deployBody)).code, 0);
    assert.equal(
      (await rawCall("/flow/activate", '{"elementName":"u8","path":"/u8"}')).data,
      "APPROVED",
    );
    const r = await run(server, utf8);
    assert.equal(r.answer.code, 0, r.answer.message);
    const run0 = await server.services.store.getRun(null, r.runId ?? "");
    assert.deepEqual(run0?.scope, { app: scope.app, space: scope.space });
    assert.equal((await initiator(server, r.runId))?.userId, "张三");
    const latin = await run(server, { ...utf8, user: Buffer.from("Müller", "latin1") });
    assert.equal(latin.answer.code, 0, latin.answer.message);
    assert.equal((await initiator(server, latin.runId))?.userId, "Müller");
  });

  /** A deploy and activation with the head's header values written as the given bytes. */
  const deployRaw = async (target: TestServer, headers: Record<string, Buffer>) => {
    const port = Number(new URL(target.url).port);
    const call = async (path: string, body: string) => {
      const lines = Object.entries(headers).map(([k, v]) =>
        Buffer.concat([Buffer.from(`${k}: `), v, CRLF]),
      );
      const head = Buffer.concat([
        Buffer.from(
          `POST ${DF}${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`,
        ),
        ...lines,
      ]);
      const a = await rawRequest(port, "", Buffer.concat([head, CRLF, Buffer.from(body)]), 15_000);
      return JSON.parse(a.body.toString()) as { code: number; data: unknown };
    };
    const flow = { elementName: "u8", revisionName: "r1", path: "/u8", flow: NO_SCRIPT_FLOW };
    assert.equal((await call("/flow/deploy", JSON.stringify({ ...flow, configure: {} }))).code, 0);
    const activated = await call("/flow/activate", '{"elementName":"u8","path":"/u8"}');
    assert.equal(activated.data, "APPROVED");
  };

  it("two byte forms of one name are never one scope (a Latin-1 gateway's spaces)", async () => {
    // A gateway that writes header text as Latin-1 (Node, Netty, Python) sends the space "Müller"
    // as 0xfc and a space named "MÃ¼ller" as 0xc3 0xbc, the UTF-8 bytes of "Müller". Read as
    // UTF-8 the second would be the first tenant's scope.
    const victim = { app: Buffer.from("gw"), space: Buffer.from("Müller", "latin1") };
    await deployRaw(server, { ...victim, user: Buffer.from("v") });
    const own = await run(server, { ...victim, user: "v" });
    assert.equal(own.answer.code, 0, own.answer.message);
    const other = await run(server, {
      app: Buffer.from("gw"),
      space: Buffer.from("MÃ¼ller", "latin1"),
      user: "attacker",
    });
    assert.notEqual(other.answer.code, 0, "another byte form reached the scope");
    assert.match(other.answer.message, /does not exist/);
  });

  it("a token signed over a UTF-8 user is accepted", async () => {
    const scope = { app: "app1", space: "s1", user: "张三" };
    await deployAndActivate(
      signed,
      "u8",
      NO_SCRIPT_FLOW,
      {},
      {
        app: "app1",
        space: "s1",
        user: "ops",
        token: signToken(
          SECRET,
          { app: "app1", space: "s1", user: "ops" },
          Math.floor(Date.now() / 1000),
        ),
      },
    );
    const token = signToken(SECRET, scope, Math.floor(Date.now() / 1000));
    const r = await run(signed, { app: "app1", space: "s1", user: Buffer.from("张三"), token });
    assert.equal(r.answer.code, 0, r.answer.message);
    assert.equal((await initiator(signed, r.runId))?.userId, "张三");
  });

  it("a token signed over a UTF-8 user within Latin-1 (Go's Müller) is read as signed", async () => {
    const token = signToken(
      SECRET,
      { app: "app1", space: "s1", user: "Müller" },
      Math.floor(Date.now() / 1000),
    );
    const r = await run(signed, { app: "app1", space: "s1", user: Buffer.from("Müller"), token });
    assert.equal(r.answer.code, 0, r.answer.message);
    assert.equal((await initiator(signed, r.runId))?.userId, "Müller");
  });
});
