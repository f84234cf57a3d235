"""The client scenario of test/http/clients.test.ts in Python (docs/errors.md, "Clients as business
systems write them"): `requests`, bodies from dataclasses through `dataclasses.asdict`, so every
field left at None goes out as JSON null, the deploy's graph and configure included.

Upload scripts, deploy and activate two flows, run them async and sync, list runs, run scripts.
Every answer is checked; the first mismatch is printed and the exit status is 1. Each step that
passes prints "ok STEP [ID]".

Configuration: SLUICE_URL (or the first argument), SLUICE_APP, SLUICE_SPACE, SLUICE_USER,
SLUICE_FIXTURES_DIR (score.py and greet.py); SLUICE_APP_SECRET and SLUICE_INTERNAL_SECRET sign
tokens (signature mode); DATAFLOW_PREFIX and SCRIPT_PREFIX as the server's.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import requests

# Every wait asks for a bounded time: the meaning of timeout 0 is not this client's concern.
WAIT_S = 60
FLOWS = "/clients"
SCRIPTS = "/clients/scripts"
ENVELOPE_KEYS = {"status", "code", "message", "data"}
RUN_INFO_KEYS = {
    "runId", "triggerType", "runStatus", "duration", "createTime", "startTime", "endTime",
    "version", "runName", "summary", "runParam", "initiator",
}
MONITOR_KEYS = {
    "totalCount", "totalPage", "runs", "queuedCount", "startedCount", "successCount",
    "failureCount", "canceledCount",
}


class Mismatch(Exception):
    pass


# ---- request bodies ----


@dataclass
class ElementRef:
    """FlowElementInfo of activate and deactivate; also how a flow names an element (a script
    node's element, a custom error handler's)."""
    elementName: str
    elementType: Optional[str] = None
    folderId: Optional[str] = None
    path: Optional[str] = None
    elementId: Optional[str] = None


# The flow graph (docs/flow-graph.md, "Graph"): every field left at None goes out as null.


@dataclass
class InputConfig:
    schema: Optional[dict[str, Any]] = None  # a JSON Schema: free-form data, not a dataclass


@dataclass
class ExprOperator:
    id: Optional[str]
    expr: str
    type: str = "expr"


@dataclass
class FilterOperator:
    id: Optional[str]
    expr: str
    type: str = "filter"


@dataclass
class MapOperator:
    id: Optional[str]
    fields: dict[str, str]
    type: str = "map"


@dataclass
class TransformConfig:
    operators: list[Any] = field(default_factory=list)


@dataclass
class ScriptConfig:
    """An uploaded script (element) or inline code, not both."""
    element: Optional[ElementRef] = None
    code: Optional[str] = None


@dataclass
class Vertex:
    id: str
    type: str
    name: Optional[str] = None
    config: Any = None  # InputConfig, TransformConfig, ScriptConfig; None for an output
    retries: Optional[int] = None
    retryDelayMs: Optional[int] = None
    timeoutSeconds: Optional[float] = None
    continueOnError: Optional[bool] = None


@dataclass
class Edge:
    source: str
    target: str
    id: Optional[str] = None
    when: Optional[str] = None  # a JSONata condition; None, the edge is always taken


@dataclass
class Graph:
    vertexes: list[Vertex] = field(default_factory=list)
    edges: Optional[list[Edge]] = None


# configure (docs/flow-graph.md, "configure").


@dataclass
class Trigger:
    """One dataclass for both trigger types: a manual trigger leaves the cron fields None."""
    type: str
    name: Optional[str] = None
    crontab: Optional[str] = None
    timezone: Optional[str] = None
    parameter: Any = None


@dataclass
class EmailHandler:
    to: list[str]
    subject: Optional[str] = None


@dataclass
class BotHandler:
    webhookUrl: str
    kind: Optional[str] = None


@dataclass
class CustomHandler:
    element: ElementRef


@dataclass
class ErrorHandlers:
    email: Optional[EmailHandler] = None
    bot: Optional[BotHandler] = None
    custom: Optional[CustomHandler] = None


@dataclass
class RunTimeout:
    type: str  # system, or customized and sentinel with their seconds
    seconds: Optional[int] = None


@dataclass
class FileCleanup:
    type: str  # default, keep, afterRun, or days with its days
    days: Optional[int] = None


@dataclass
class Configure:
    triggers: Optional[list[Trigger]] = None
    errorHandlers: Optional[ErrorHandlers] = None
    prelude: Optional[str] = None
    runNameTemplate: Optional[str] = None
    runTimeout: Optional[RunTimeout] = None
    logContent: Optional[str] = None
    fileCleanup: Optional[FileCleanup] = None


@dataclass
class DeployRequest:
    elementName: str
    revisionName: str
    flow: Optional[Graph] = None
    configure: Optional[Configure] = None
    elementType: Optional[str] = None
    folderId: Optional[str] = None
    path: Optional[str] = None
    elementId: Optional[str] = None
    description: Optional[dict[str, str]] = None


@dataclass
class RunRequest:
    elementName: Optional[str] = None
    elementType: Optional[str] = None
    folderId: Optional[str] = None
    path: Optional[str] = None
    elementId: Optional[str] = None
    parameter: Any = None
    inProcess: Optional[bool] = None
    parentRunId: Optional[str] = None


@dataclass
class RunSyncRequest(RunRequest):
    timeout: Optional[int] = None


@dataclass
class ScriptRunRequest:
    elementName: str
    elementType: Optional[str] = None
    parameter: Any = None
    folderId: Optional[str] = None
    path: Optional[str] = None


@dataclass
class ScriptRunSyncRequest(ScriptRunRequest):
    timeout: Optional[int] = None
    terminateOnTimeout: Optional[bool] = None


@dataclass
class OrderBy:
    name: str
    asc: Optional[bool] = None


@dataclass
class PagedRunsFilter:
    pageNo: int
    pageSize: int
    elementName: Optional[str] = None
    elementType: Optional[str] = None
    folderId: Optional[str] = None
    path: Optional[str] = None
    elementId: Optional[str] = None
    runStatusFilter: Optional[list[str]] = None
    triggerFilter: Optional[list[str]] = None
    orderBy: Optional[list[OrderBy]] = None
    versionFilter: Optional[list[str]] = None
    quickSearch: Optional[str] = None
    # Dicts, not a dataclass: an interval filter's "from" is a Python keyword.
    colFilters: Optional[list[dict[str, Any]]] = None


@dataclass
class Order:
    amount: int
    qty: int
    note: Optional[str] = None  # nobody wrote one: it reaches the flow as null


@dataclass
class OrdersParameter:
    orders: list[Order] = field(default_factory=list)
    tag: Optional[str] = None


@dataclass
class GreetParameter:
    name: str
    note: Optional[str] = None


# Each order's unset note reaches the flow as null and stays in its records.
ORDERS_RESULT = [
    {"amount": 2, "qty": 3, "note": None, "total": 6},
    {"amount": 5, "qty": 1, "note": None, "total": 5},
]
SCORED_RESULT = [dict(r, score=r["total"] * 10) for r in ORDERS_RESULT]
# greet.py echoes the keys it got: the unset note arrives as None.
GREET_RESULT = {"greeting": "hello ada", "keys": ["name", "note"], "note": None}


# ---- HTTP ----


class SluiceClient:
    def __init__(self, base_url: str, app: str, space: str, user: str,
                 app_secret: Optional[str], internal_secret: Optional[str]) -> None:
        self.base_url = base_url.rstrip("/")
        self.scope = {"app": app, "space": space, "user": user}
        self.app_secret = app_secret
        self.internal_secret = internal_secret
        self.session = requests.Session()

    def headers(self, internal: bool) -> dict[str, str]:
        h = dict(self.scope)
        secret = self.internal_secret if internal else self.app_secret
        if secret:
            h["token"] = self.token(secret)
        return h

    def token(self, secret: str) -> str:
        """docs/auth.md, "Token": unixSeconds "." hex HMAC-SHA256 of app, space, user and the time."""
        now = str(int(time.time()))
        text = "\n".join([self.scope["app"], self.scope["space"], self.scope["user"], now])
        return now + "." + hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()

    def post(self, path: str, body: Any, internal: bool = False,
             params: Optional[dict[str, Any]] = None) -> requests.Response:
        payload = asdict(body) if hasattr(body, "__dataclass_fields__") else body
        return self.session.post(self.base_url + path, json=payload, params=params,
                                 headers=self.headers(internal), timeout=120)

    def get(self, path: str, params: Optional[dict[str, Any]] = None,
            internal: bool = False) -> requests.Response:
        return self.session.get(self.base_url + path, params=params,
                                headers=self.headers(internal), timeout=120)

    def upload(self, path: str, folder: str, files: list[Path]) -> requests.Response:
        parts = [("batchFile", (f.name, f.read_bytes(), "text/x-python")) for f in files]
        return self.session.post(self.base_url + path, data={"path": folder, "overwrite": "false"},
                                 files=parts, headers=self.headers(True), timeout=120)


# ---- checks ----


def expect(condition: bool, what: str, got: Any) -> None:
    if not condition:
        raise Mismatch(f"{what}; got {got}")


def envelope(r: requests.Response, what: str) -> dict[str, Any]:
    expect(r.status_code == 200, f"{what} answers HTTP 200", f"{r.status_code} {r.text}")
    try:
        e = r.json()
    except ValueError:
        raise Mismatch(f"{what} answers JSON; got {r.text}") from None
    expect(isinstance(e, dict) and set(e) == ENVELOPE_KEYS,
           f"{what} answers an envelope {{status, code, message, data}}", r.text)
    return e


def ok(r: requests.Response, what: str) -> Any:
    e = envelope(r, what)
    expect(e["status"] is True and e["code"] == 0 and e["message"] == "success",
           f"{what} succeeds (status true, code 0)", r.text)
    return e["data"]


class Scenario:
    def __init__(self, client: SluiceClient, df: str, sp: str, fixtures: Path) -> None:
        self.client = client
        self.df = df
        self.sp = sp
        self.fixtures = fixtures
        self.steps = 0

    def passed(self, step: str, ident: Optional[str] = None) -> None:
        self.steps += 1
        print(f"ok {step}" + (f" {ident}" if ident else ""), flush=True)

    def run(self) -> None:
        self.upload()
        self.deploy("orders")
        self.deploy("scored")
        self.activate("orders")
        self.activate("scored")

        async_run = self.run_async()
        self.run_result(async_run)
        sync_run = self.run_sync()
        self.run_bad_parameter()
        self.list_runs("list-runs-async", "orders", "DPL", FLOWS, "ASYNC", async_run, "orders-async")
        self.list_runs("list-runs-sync", "scored", "DPL", FLOWS, "SYNC", sync_run, "scored-sync")

        external_task = self.script_external_run_sync()
        self.script_result(external_task)
        self.script_run_sync()
        async_task = self.script_run()
        self.script_lifespan(async_task)
        self.list_runs("list-tasks", "greet", "PY", SCRIPTS, "SYNC", external_task, None)

    def upload(self) -> None:
        names = ["score", "greet"]
        r = self.client.upload(self.sp + "/file/batch-upload", SCRIPTS,
                               [self.fixtures / f"{n}.py" for n in names])
        items = ok(r, "upload")
        expect(isinstance(items, list) and len(items) == 2, "upload answers one item per file", r.text)
        for i, name in enumerate(names):
            expect(items[i] == {"filePath": f"{SCRIPTS}/{name}", "status": 0, "message": "created"},
                   f"upload item {i} is {SCRIPTS}/{name} status 0 created", r.text)
        self.passed("upload", f"{items[0]['filePath']} {items[1]['filePath']}")

    @staticmethod
    def flow(name: str) -> Graph:
        """A flow's graph built from dataclasses: "orders" cleans the orders (input, transform,
        output); "scored" also runs the uploaded score script on them. Every field left at None
        goes out as null, which the deploy reads as absent (docs/flow-graph.md): a vertex's name,
        retries, retryDelayMs, timeoutSeconds and continueOnError, the output's config, the script
        locator's elementType, folderId and elementId, the script node's code, an edge's id and
        when."""
        vertexes = [
            Vertex("in", "input", config=InputConfig(schema={"type": "object", "required": ["orders"]})),
            Vertex("clean", "transform", config=TransformConfig(operators=[
                ExprOperator("f1", "orders"),
                FilterOperator("f2", "amount > 0"),
                MapOperator("m1", {"total": "amount * qty"}),
            ])),
        ]
        if name == "scored":
            vertexes.append(Vertex("score", "script",
                                   config=ScriptConfig(element=ElementRef("score", path=SCRIPTS))))
        vertexes.append(Vertex("out", "output"))
        edges = [Edge(a.id, b.id) for a, b in zip(vertexes, vertexes[1:])]
        return Graph(vertexes=vertexes, edges=edges)

    @staticmethod
    def configure() -> Configure:
        """configure with its defaults written out, as a team's form would send them: a manual
        trigger (its cron fields None), no error handler (email, bot and custom None), the system
        run timeout (seconds None), detailed logs, the default file cleanup (days None), no
        prelude."""
        return Configure(
            triggers=[Trigger("manual")],
            errorHandlers=ErrorHandlers(),
            runNameTemplate="${elementName}-${param.tag}",
            runTimeout=RunTimeout("system"),
            logContent="DETAILED",
            fileCleanup=FileCleanup("default"),
        )

    def deploy(self, name: str) -> None:
        req = DeployRequest(
            elementName=name,
            revisionName="r1",
            flow=self.flow(name),
            configure=self.configure(),
            elementType="DPL",
            path=FLOWS,
            description={"en": f"{name} from the Python client"},
        )
        r = self.client.post(self.df + "/flow/deploy", req)
        results = ok(r, f"deploy {name}")
        expect(isinstance(results, list) and all((v.get("severity") or 0) < 2 for v in results),
               f"deploy {name} has no errors", r.text)
        self.passed(f"deploy-{name}")

    def activate(self, name: str) -> None:
        r = self.client.post(self.df + "/flow/activate", ElementRef(elementName=name, path=FLOWS))
        expect(ok(r, f"activate {name}") == "APPROVED", f"activate {name} answers APPROVED", r.text)
        self.passed(f"activate-{name}")

    @staticmethod
    def orders(tag: str) -> OrdersParameter:
        return OrdersParameter(orders=[Order(2, 3), Order(0, 9), Order(5, 1)], tag=tag)

    def run_async(self) -> str:
        req = RunRequest(elementName="orders", path=FLOWS, parameter=asdict(self.orders("async")))
        r = self.client.post(self.df + "/run", req)
        run_id = ok(r, "run")
        expect(isinstance(run_id, str) and run_id != "" and r.headers.get("x-run-id") == run_id,
               "run answers its ID in data and x-run-id", f"{r.text} x-run-id {r.headers.get('x-run-id')}")
        self.passed("run-async", run_id)
        return run_id

    def run_result(self, run_id: str) -> None:
        r = self.client.get(f"{self.df}/run/{run_id}/result", params={"timeout": WAIT_S})
        data = ok(r, "run result")
        expect(data == ORDERS_RESULT, f"run result of orders is {ORDERS_RESULT}", data)
        self.passed("run-result", run_id)

    def run_sync(self) -> str:
        req = RunSyncRequest(elementName="scored", path=FLOWS,
                             parameter=asdict(self.orders("sync")), timeout=WAIT_S)
        r = self.client.post(self.df + "/run-sync", req)
        data = ok(r, "run-sync")
        expect(data == SCORED_RESULT, f"run-sync of scored is {SCORED_RESULT}", data)
        run_id = r.headers.get("x-run-id")
        expect(bool(run_id), "run-sync names its run in x-run-id", dict(r.headers))
        self.passed("run-sync", run_id)
        return run_id or ""

    def run_bad_parameter(self) -> None:
        """The input node requires orders: an error envelope, read like any other answer."""
        req = RunSyncRequest(elementName="orders", path=FLOWS, parameter={"tag": "no orders"},
                             timeout=WAIT_S)
        r = self.client.post(self.df + "/run-sync", req)
        e = envelope(r, "run-sync without orders")
        expect(e["status"] is False and e["code"] == 400 and e["data"] is None,
               "a parameter without orders is the 400 envelope", r.text)
        self.passed("run-bad-parameter")

    def list_runs(self, step: str, element_name: str, element_type: str, path: str,
                  trigger: str, expected_id: str, expected_run_name: Optional[str]) -> None:
        f = PagedRunsFilter(pageNo=0, pageSize=10, elementName=element_name,
                            elementType=element_type, path=path, triggerFilter=[trigger])
        r = self.client.post(self.df + "/monitor/runs", f)
        page = ok(r, step)
        expect(isinstance(page, dict) and set(page) == MONITOR_KEYS,
               f"{step} answers exactly the fields of MonitorRunResp", r.text)
        expect(page["totalCount"] == 1 and page["totalPage"] == 1 and len(page["runs"]) == 1
               and page["successCount"] == 1,
               f"{step} lists exactly one {trigger} run of {element_name}", r.text)
        run = page["runs"][0]
        expect(set(run) <= RUN_INFO_KEYS, f"{step} lists runs with the fields of RunInfo only", r.text)
        expect(run["runId"] == expected_id and run["runStatus"] == "SUCCESS"
               and run["triggerType"] == trigger and "endTime" in run and "initiator" in run,
               f"{step} lists run {expected_id} as a finished {trigger} SUCCESS", r.text)
        if expected_run_name is not None:
            expect(run.get("runName") == expected_run_name and run.get("version") == "1",
                   f"{step} names the run {expected_run_name} from version 1", r.text)
        self.passed(step, run["runId"])

    def script_external_run_sync(self) -> str:
        r = self.client.post(self.sp + "/external/greet/run-sync", GreetParameter(name="ada"),
                             params={"path": SCRIPTS, "timeout": WAIT_S})
        expect(r.status_code == 200, "external run-sync answers HTTP 200", r.status_code)
        expect(r.headers.get("x-task-status") == "SUCCESS",
               "external run-sync x-task-status SUCCESS", f"{dict(r.headers)} {r.text}")
        # The external run-sync answers the script's own value, not an envelope (docs/errors.md).
        expect(r.json() == GREET_RESULT, f"external run-sync of greet is {GREET_RESULT}", r.text)
        task_id = r.headers.get("x-task-id")
        expect(bool(task_id), "external run-sync names its task in x-task-id", dict(r.headers))
        self.passed("script-external-run-sync", task_id)
        return task_id or ""

    def script_result(self, task_id: str) -> None:
        r = self.client.get(f"{self.sp}/script/result/{task_id}", params={"timeout": WAIT_S})
        data = ok(r, "script result")
        expect(data == GREET_RESULT, f"script result of greet is {GREET_RESULT}", data)
        self.passed("script-result", task_id)

    def script_run_sync(self) -> None:
        req = ScriptRunSyncRequest(elementName="score", path=SCRIPTS, parameter=ORDERS_RESULT,
                                   timeout=WAIT_S)
        r = self.client.post(self.sp + "/script/run-sync", req, internal=True)
        data = ok(r, "script run-sync")
        expect(data == SCORED_RESULT, f"script run-sync of score is {SCORED_RESULT}", data)
        expect(r.headers.get("x-task-status") == "SUCCESS", "script run-sync x-task-status SUCCESS",
               dict(r.headers))
        self.passed("script-run-sync", r.headers.get("x-task-id"))

    def script_run(self) -> str:
        req = ScriptRunRequest(elementName="score", path=SCRIPTS, parameter=ORDERS_RESULT)
        r = self.client.post(self.sp + "/script/run", req, internal=True)
        task_id = ok(r, "script run")
        expect(isinstance(task_id, str) and task_id != "" and r.headers.get("x-task-id") == task_id,
               "script run answers its task ID in data and x-task-id", r.text)
        self.passed("script-run", task_id)
        return task_id

    def script_lifespan(self, task_id: str) -> None:
        r = self.client.get(f"{self.sp}/script/lifespan/{task_id}", params={"timeout": WAIT_S})
        life = ok(r, "script lifespan")
        expect(life == {"success": True, "retval": SCORED_RESULT, "stdout": "scoring 2\n", "stderr": ""},
               "lifespan of score: success, its value, its print, no stderr", r.text)
        self.passed("script-lifespan", task_id)


def required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise Mismatch(f"environment variable {name} is not set")
    return value


def main() -> int:
    try:
        url = sys.argv[1] if len(sys.argv) > 1 else required("SLUICE_URL")
        client = SluiceClient(url, required("SLUICE_APP"), required("SLUICE_SPACE"),
                              required("SLUICE_USER"), os.environ.get("SLUICE_APP_SECRET"),
                              os.environ.get("SLUICE_INTERNAL_SECRET"))
        scenario = Scenario(client, os.environ.get("DATAFLOW_PREFIX") or "/dataflow-3-0",
                            os.environ.get("SCRIPT_PREFIX") or "/script",
                            Path(required("SLUICE_FIXTURES_DIR")))
        scenario.run()
        print(f"done {scenario.steps} steps", flush=True)
        return 0
    except Mismatch as e:
        print(f"MISMATCH: {e}", file=sys.stderr)
        return 1
    except requests.RequestException as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
