import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DF, deployAndActivate } from "../helpers/flows.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import {
  type Hit,
  type Mail,
  mailText,
  startReceiver,
  startSmtp,
} from "./error-handlers-helpers.ts";

const failing = (message = "no stock") => ({
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "py",
      type: "script",
      config: { code: `def main(p):\n    raise RuntimeError('${message}')\n` },
    },
  ],
  edges: [{ source: "in", target: "py" }],
});
const sleeping = (s: number) => ({
  vertexes: [
    { id: "in", type: "input" },
    {
      id: "py",
      type: "script",
      config: { code: `import time\ndef main(p):\n    time.sleep(${s})\n    return 'done'\n` },
    },
  ],
  edges: [{ source: "in", target: "py" }],
});

describe("error handlers (real SMTP server and webhook receiver on loopback)", () => {
  let server: TestServer;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  let hook: Awaited<ReturnType<typeof startReceiver>>;
  const h = scopeHeaders();
  const runSync = async (elementName: string) => {
    const r = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName, parameter: {} },
    });
    return r.headers.get("x-run-id") ?? "";
  };
  const monitorRun = async (runId: string) =>
    (await server.call("GET", `${DF}/monitor/run?runId=${runId}`, { headers: h })).body.data;
  const hitsFor = (path: string): Hit[] => hook.hits.filter((x) => x.path === path);

  before(async () => {
    smtp = await startSmtp();
    hook = await startReceiver();
    server = await startServer({
      SMTP_URL: smtp.url,
      SMTP_FROM: "sluice@test.local",
      ERROR_HANDLER_BACKOFF_MS: "5",
    });
    await upload(
      server,
      [
        {
          name: "onfail.py",
          content:
            "def main(e):\n    print('handled', e['event'], e['runId'])\n    return e['runId']\n",
        },
      ],
      { path: "/ops" },
    );
    await deployAndActivate(server, "all-handlers", failing(), {
      errorHandlers: {
        email: { to: ["ops@example.com", "dev@example.com"] },
        bot: { webhookUrl: `${hook.url}/generic` },
        custom: { element: { elementName: "onfail", elementType: "PY", path: "/ops" } },
      },
    });
    for (const kind of ["slack", "dingtalk", "feishu"]) {
      await deployAndActivate(server, `bot-${kind}`, failing(), {
        errorHandlers: { bot: { webhookUrl: `${hook.url}/${kind}`, kind } },
      });
    }
    await deployAndActivate(server, "bot-down", failing(), {
      errorHandlers: {
        bot: { webhookUrl: `${hook.url}/status/500/down` },
        email: { to: ["x@example.com"], subject: "custom subject" },
      },
    });
    await deployAndActivate(server, "handler-flow", {
      vertexes: [
        { id: "in", type: "input" },
        { id: "out", type: "output" },
      ],
      edges: [{ source: "in", target: "out" }],
    });
    await deployAndActivate(server, "dpl-custom", failing(), {
      errorHandlers: { custom: { element: { elementName: "handler-flow" } } },
    });
    // A transform whose expression throws: JSONata throws plain objects, not Errors.
    await deployAndActivate(
      server,
      "jsonata-throws",
      {
        vertexes: [
          { id: "in", type: "input" },
          {
            id: "calc",
            type: "transform",
            config: { operators: [{ id: "e1", type: "expr", expr: '$error("out of stock")' }] },
          },
          { id: "out", type: "output" },
        ],
        edges: [
          { source: "in", target: "calc" },
          { source: "calc", target: "out" },
        ],
      },
      { errorHandlers: { bot: { webhookUrl: `${hook.url}/jsonata` } } },
    );
    await deployAndActivate(server, "sentinel", sleeping(1.0), {
      runTimeout: { type: "sentinel", seconds: 0.3 },
      errorHandlers: { bot: { webhookUrl: `${hook.url}/sentinel` } },
    });
  });
  after(async () => {
    await server.close();
    await smtp.close();
    hook.close();
  });

  it("an expression's error reaches the run and the generic bot as its text", async () => {
    const runId = await runSync("jsonata-throws");
    await server.services.errorHandlers.idle();
    const [hit] = hitsFor("/jsonata");
    assert.equal(hit?.body.runId, runId);
    assert.equal(hit?.body.failedNodeId, "calc");
    assert.match(String(hit?.body.error), /out of stock/);
    assert.doesNotMatch(String(hit?.body.error), /\[object Object\]/);
  });

  it("on FAILURE: mails every address, posts the event to a generic bot, runs the custom PY element", async () => {
    const runId = await runSync("all-handlers");
    await server.services.errorHandlers.idle();
    const mail = smtp.mails.find((m) => m.raw.includes(runId)) as Mail;
    assert.ok(mail, "mail delivered");
    assert.deepEqual(mail.to.sort(), ["dev@example.com", "ops@example.com"]);
    assert.equal(mail.from, "sluice@test.local");
    const text = mailText(mail.raw);
    assert.match(text, new RegExp(`Subject: Sluice: run ${runId} of all-handlers failed`));
    assert.match(text, /Failed node: py/);
    assert.match(text, /RuntimeError: no stock/);

    const [generic] = hitsFor("/generic");
    assert.deepEqual(Object.keys(generic?.body ?? {}).sort(), [
      "createTime",
      "elementName",
      "elementType",
      "endTime",
      "error",
      "event",
      "failedNodeId",
      "runId",
      "runStatus",
      "startTime",
      "triggerType",
      "version",
    ]);
    assert.equal(generic?.body.event, "run.failure");
    assert.equal(generic?.body.runId, runId);
    assert.equal(generic?.body.runStatus, "FAILURE");
    assert.equal(generic?.body.triggerType, "SYNC");
    assert.equal(generic?.body.failedNodeId, "py");
    assert.equal(generic?.body.version, "1");
    // The failure's own text, not an object turned into "[object Object]".
    assert.equal(typeof generic?.body.error, "string");
    assert.match(String(generic?.body.error), /RuntimeError: no stock/);

    const [child] = await server.services.store.childRuns(runId);
    assert.equal(child?.elementType, "PY");
    assert.equal(child?.triggerType, "API");
    const event = JSON.parse(child?.runParam ?? "{}");
    assert.equal(event.runId, runId);
    assert.equal(event.failedNodeId, "py", "the custom handler's event names the failed node");
    assert.match(String(event.error), /RuntimeError: no stock/);

    const shown = await monitorRun(runId);
    assert.equal(shown.runStatus, "FAILURE");
    const results = shown.errorHandlerResults as {
      kind: string;
      ok: boolean;
      attempts: number;
      runId?: string;
    }[];
    assert.deepEqual(results.map((r) => [r.kind, r.ok, r.attempts]).sort(), [
      ["bot", true, 1],
      ["custom", true, 1],
      ["email", true, 1],
    ]);
    assert.equal(results.find((r) => r.kind === "custom")?.runId, child?.id);
  });

  it("Slack, DingTalk and Feishu get their incoming-webhook shapes with the facts as text", async () => {
    const ids: Record<string, string> = {};
    for (const kind of ["slack", "dingtalk", "feishu"]) ids[kind] = await runSync(`bot-${kind}`);
    await server.services.errorHandlers.idle();
    const slack = hitsFor("/slack")[0]?.body as { text: string };
    assert.deepEqual(Object.keys(slack), ["text"]);
    assert.match(
      slack.text,
      new RegExp(`run ${ids.slack} of bot-slack failed[\\s\\S]*Error: RuntimeError: no stock`),
    );
    const ding = hitsFor("/dingtalk")[0]?.body as { msgtype: string; text: { content: string } };
    assert.equal(ding.msgtype, "text");
    assert.match(ding.text.content, new RegExp(`${ids.dingtalk}[\\s\\S]*Failed node: py`));
    const feishu = hitsFor("/feishu")[0]?.body as { msg_type: string; content: { text: string } };
    assert.equal(feishu.msg_type, "text");
    assert.match(feishu.content.text, new RegExp(`${ids.feishu}[\\s\\S]*Trigger: SYNC`));
    // Every bot names the failed node and the failure's own text (never "[object Object]").
    for (const text of [slack.text, ding.text.content, feishu.content.text]) {
      assert.match(text, /Failed node: py/);
      assert.match(text, /RuntimeError: no stock/);
      assert.doesNotMatch(text, /\[object Object\]/);
    }
  });

  it("a failing handler is retried with backoff, then recorded; the run keeps its own outcome", async () => {
    const runId = await runSync("bot-down");
    await server.services.errorHandlers.idle();
    assert.equal(hitsFor("/status/500/down").length, 3, "three attempts");
    const shown = await monitorRun(runId);
    assert.equal(shown.runStatus, "FAILURE");
    assert.match(shown.summary, /no stock/);
    const bot = shown.errorHandlerResults.find((r: { kind: string }) => r.kind === "bot");
    assert.equal(bot.ok, false);
    assert.equal(bot.attempts, 3);
    assert.match(bot.error, /webhook answered HTTP 500/);
    const email = shown.errorHandlerResults.find((r: { kind: string }) => r.kind === "email");
    assert.equal(email.ok, true, "handlers are independent");
    assert.ok(smtp.mails.some((m) => m.raw.includes("Subject: custom subject")));
  });

  it("a custom DPL handler runs with the event as parameter, trigger API, parentRunId the failed run", async () => {
    const runId = await runSync("dpl-custom");
    await server.services.errorHandlers.idle();
    const [child] = await server.services.store.childRuns(runId);
    assert.deepEqual(
      [child?.elementName, child?.triggerType, child?.status],
      ["handler-flow", "API", "SUCCESS"],
    );
    assert.equal(JSON.parse(child?.result ?? "{}").event, "run.failure");
    // What tells a handler's run on a node without its mark (src/runs/error-handlers/index.ts).
    assert.equal(child?.initiator, null, "a handler's run has no initiator");
    const failed = await server.services.store.getRun(null, runId);
    assert.ok(failed?.endTime != null && child && failed.endTime <= child.createTime);
  });

  it("a sentinel timeout tells the handlers once, within 0.5 s of the limit, and the run goes on", async () => {
    const started = Date.now();
    const runId = await runSync("sentinel");
    await server.services.errorHandlers.idle();
    const hits = hitsFor("/sentinel");
    assert.equal(hits.length, 1, "told once");
    assert.equal(hits[0]?.body.event, "run.timeout");
    assert.equal(hits[0]?.body.runStatus, "STARTED");
    assert.match(String(hits[0]?.body.error), /still running after its time limit of 0.3s/);
    const late = (hits[0]?.at ?? 0) - started - 300;
    assert.ok(late < 500, `told ${late} ms after the limit`);
    const shown = await monitorRun(runId);
    assert.equal(shown.runStatus, "SUCCESS");
    assert.deepEqual(
      shown.errorHandlerResults.map((r: { event: string; ok: boolean }) => [r.event, r.ok]),
      [["run.timeout", true]],
    );
  });
});

describe("error handler messages in Chinese (NOTIFY_LANGUAGE=zh-cn)", () => {
  let server: TestServer;
  let hook: Awaited<ReturnType<typeof startReceiver>>;
  before(async () => {
    hook = await startReceiver();
    server = await startServer({
      NOTIFY_LANGUAGE: "zh-cn",
      ERROR_HANDLER_BACKOFF_MS: "1",
      ERROR_HANDLER_ATTEMPTS: "2",
    });
    await deployAndActivate(server, "zh-slack", failing(), {
      errorHandlers: { bot: { webhookUrl: `${hook.url}/slack`, kind: "slack" } },
    });
    await deployAndActivate(server, "zh-down", failing(), {
      errorHandlers: {
        bot: { webhookUrl: `${hook.url}/dingtalk-refuse`, kind: "dingtalk" },
        email: { to: ["a@example.com"] },
      },
    });
  });
  after(async () => {
    await server.close();
    hook.close();
  });

  it("notifications and recorded handler errors are Chinese", async () => {
    const h = scopeHeaders();
    const a = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "zh-slack", parameter: {} },
    });
    const b = await server.call("POST", `${DF}/run-sync`, {
      headers: h,
      body: { elementName: "zh-down", parameter: {} },
    });
    await server.services.errorHandlers.idle();
    const slack = hook.hits.find((x) => x.path === "/slack")?.body as { text: string };
    assert.match(slack.text, new RegExp(`zh-slack 的运行 ${a.headers.get("x-run-id")} 失败`));
    assert.match(slack.text, /失败节点: py/);
    const shown = (
      await server.call("GET", `${DF}/monitor/run?runId=${b.headers.get("x-run-id")}`, {
        headers: h,
      })
    ).body.data;
    const bot = shown.errorHandlerResults.find((r: { kind: string }) => r.kind === "bot");
    assert.deepEqual([bot.ok, bot.attempts], [false, 2]);
    assert.match(bot.error, /Webhook 拒绝了消息/);
    const email = shown.errorHandlerResults.find((r: { kind: string }) => r.kind === "email");
    assert.deepEqual([email.ok, email.attempts], [false, 1], "no SMTP: permanent, not retried");
    assert.match(email.error, /本服务未配置邮件/);
  });
});
