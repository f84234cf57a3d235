package sluiceclient;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import sluiceclient.Requests.Configure;
import sluiceclient.Requests.DeployRequest;
import sluiceclient.Requests.Edge;
import sluiceclient.Requests.ElementRef;
import sluiceclient.Requests.ErrorHandlers;
import sluiceclient.Requests.ExprOperator;
import sluiceclient.Requests.FileCleanup;
import sluiceclient.Requests.FilterOperator;
import sluiceclient.Requests.Graph;
import sluiceclient.Requests.GreetParameter;
import sluiceclient.Requests.InputConfig;
import sluiceclient.Requests.MapOperator;
import sluiceclient.Requests.Order;
import sluiceclient.Requests.OrdersParameter;
import sluiceclient.Requests.PagedRunsFilter;
import sluiceclient.Requests.RunTimeout;
import sluiceclient.Requests.RunRequest;
import sluiceclient.Requests.RunSyncRequest;
import sluiceclient.Requests.ScriptRunRequest;
import sluiceclient.Requests.ScriptConfig;
import sluiceclient.Requests.ScriptRunSyncRequest;
import sluiceclient.Requests.TransformConfig;
import sluiceclient.Requests.Trigger;
import sluiceclient.Requests.Vertex;
import sluiceclient.Responses.Envelope;
import sluiceclient.Responses.Lifespan;
import sluiceclient.Responses.MonitorRunResp;
import sluiceclient.Responses.RunInfo;
import sluiceclient.Responses.UploadItem;
import sluiceclient.Responses.ValidationResult;
import sluiceclient.SluiceClient.Credential;
import sluiceclient.SluiceClient.Reply;

/**
 * The client scenario of test/http/clients.test.ts (docs/errors.md, "Clients as business systems
 * write them"): upload scripts, deploy and activate two flows, run them async and sync, list runs,
 * run scripts. Every answer is checked; the first mismatch is printed and the exit status is 1.
 * Each step that passes prints "ok STEP [ID]".
 *
 * <p>Configuration: SLUICE_URL (or the first argument), SLUICE_APP, SLUICE_SPACE, SLUICE_USER,
 * SLUICE_FIXTURES_DIR (score.py and greet.py); SLUICE_APP_SECRET and SLUICE_INTERNAL_SECRET sign
 * tokens (signature mode); DATAFLOW_PREFIX and SCRIPT_PREFIX as the server's.
 */
public final class Main {
  /** Every wait asks for a bounded time: the meaning of timeout 0 is not this client's concern. */
  private static final int WAIT_S = 60;

  private static final String FLOWS = "/clients";
  private static final String SCRIPTS = "/clients/scripts";

  static final class Mismatch extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Mismatch(String message) {
      super(message);
    }
  }

  private final SluiceClient client;
  private final String df;
  private final String sp;
  private final Path fixtures;
  private int steps;

  private Main(SluiceClient client, String df, String sp, Path fixtures) {
    this.client = client;
    this.df = df;
    this.sp = sp;
    this.fixtures = fixtures;
  }

  public static void main(String[] args) {
    try {
      String url = args.length > 0 ? args[0] : required("SLUICE_URL");
      SluiceClient client =
          new SluiceClient(
              url,
              required("SLUICE_APP"),
              required("SLUICE_SPACE"),
              required("SLUICE_USER"),
              System.getenv("SLUICE_APP_SECRET"),
              System.getenv("SLUICE_INTERNAL_SECRET"));
      Main m =
          new Main(
              client,
              env("DATAFLOW_PREFIX", "/dataflow-3-0"),
              env("SCRIPT_PREFIX", "/script"),
              Path.of(required("SLUICE_FIXTURES_DIR")));
      m.scenario();
      System.out.println("done " + m.steps + " steps");
    } catch (Mismatch e) {
      System.err.println("MISMATCH: " + e.getMessage());
      System.exit(1);
    } catch (Exception e) {
      System.err.println("ERROR: " + e);
      e.printStackTrace();
      System.exit(1);
    }
  }

  private static String env(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? fallback : v;
  }

  private static String required(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) throw new Mismatch("environment variable " + name + " is not set");
    return v;
  }

  private void scenario() throws Exception {
    upload();
    deploy("orders");
    deploy("scored");
    activate("orders");
    activate("scored");

    String asyncRun = runAsync();
    runResult(asyncRun);
    String syncRun = runSync();
    runBadParameter();
    listRuns("list-runs-async", "orders", "DPL", FLOWS, "ASYNC", asyncRun, "orders-async");
    listRuns("list-runs-sync", "scored", "DPL", FLOWS, "SYNC", syncRun, "scored-sync");

    String externalTask = scriptExternalRunSync();
    scriptResult(externalTask);
    scriptRunSync();
    String asyncTask = scriptRun();
    scriptLifespan(asyncTask);
    listRuns("list-tasks", "greet", "PY", SCRIPTS, "SYNC", externalTask, null);
  }

  // ---- steps ----

  private void upload() throws Exception {
    Map<String, String> fields = new LinkedHashMap<>();
    fields.put("path", SCRIPTS);
    fields.put("overwrite", "false");
    Reply r =
        client.postMultipart(
            sp + "/file/batch-upload",
            fields,
            "batchFile",
            List.of(fixtures.resolve("score.py"), fixtures.resolve("greet.py")),
            Credential.INTERNAL);
    List<UploadItem> items = data(ok(r, "upload"), new TypeReference<List<UploadItem>>() {});
    expect(items.size() == 2, "upload answers one item per file", r.body);
    String[] names = {"score", "greet"};
    for (int i = 0; i < 2; i++) {
      UploadItem item = items.get(i);
      expect(
          item.status == 0
              && "created".equals(item.message)
              && (SCRIPTS + "/" + names[i]).equals(item.filePath),
          "upload item " + i + " is " + SCRIPTS + "/" + names[i] + " status 0 created",
          r.body);
    }
    pass("upload", items.get(0).filePath + " " + items.get(1).filePath);
  }

  private void deploy(String name) throws Exception {
    DeployRequest req = new DeployRequest();
    req.elementName = name;
    req.revisionName = "r1";
    req.flow = flow(name);
    req.configure = configure();
    req.elementType = "DPL";
    req.path = FLOWS;
    req.description = Map.of("en", name + " from the Java client");
    Reply r = client.postJson(df + "/flow/deploy", req, Credential.APP);
    List<ValidationResult> results =
        data(ok(r, "deploy " + name), new TypeReference<List<ValidationResult>>() {});
    for (ValidationResult v : results) {
      expect(v.severity == null || v.severity < 2, "deploy " + name + " has no errors", r.body);
    }
    pass("deploy-" + name, null);
  }

  private void activate(String name) throws Exception {
    Reply r = client.postJson(df + "/flow/activate", new ElementRef(name, FLOWS), Credential.APP);
    JsonNode data = ok(r, "activate " + name).data;
    expect("APPROVED".equals(data.asText()), "activate " + name + " answers APPROVED", r.body);
    pass("activate-" + name, null);
  }

  private String runAsync() throws Exception {
    RunRequest req = new RunRequest();
    req.elementName = "orders";
    req.path = FLOWS;
    req.parameter = orders("async");
    Reply r = client.postJson(df + "/run", req, Credential.APP);
    String runId = ok(r, "run").data.asText();
    expect(!runId.isEmpty() && runId.equals(r.header("x-run-id")), "run answers its ID in data and x-run-id", r.body + " x-run-id " + r.header("x-run-id"));
    pass("run-async", runId);
    return runId;
  }

  private void runResult(String runId) throws Exception {
    Reply r =
        client.get(
            df + "/run/" + runId + "/result" + SluiceClient.query(Map.of("timeout", "" + WAIT_S)),
            Credential.APP);
    expectJson(ok(r, "run result").data, ORDERS_RESULT, "run result of orders");
    pass("run-result", runId);
  }

  private String runSync() throws Exception {
    RunSyncRequest req = new RunSyncRequest();
    req.elementName = "scored";
    req.path = FLOWS;
    req.parameter = orders("sync");
    req.timeout = WAIT_S;
    Reply r = client.postJson(df + "/run-sync", req, Credential.APP);
    expectJson(ok(r, "run-sync").data, SCORED_RESULT, "run-sync of scored");
    String runId = r.header("x-run-id");
    expect(runId != null && !runId.isEmpty(), "run-sync names its run in x-run-id", r.headers.map());
    pass("run-sync", runId);
    return runId;
  }

  /** The input node requires orders: an error envelope, read like any other answer. */
  private void runBadParameter() throws Exception {
    RunSyncRequest req = new RunSyncRequest();
    req.elementName = "orders";
    req.path = FLOWS;
    req.parameter = Map.of("tag", "no orders");
    req.timeout = WAIT_S;
    Reply r = client.postJson(df + "/run-sync", req, Credential.APP);
    Envelope e = client.envelope(r);
    expect(
        r.httpStatus == 200 && !e.status && e.code == 400 && (e.data == null || e.data.isNull()),
        "a parameter without orders is the 400 envelope",
        r.body);
    pass("run-bad-parameter", null);
  }

  private void listRuns(
      String step,
      String elementName,
      String elementType,
      String path,
      String trigger,
      String expectedId,
      String expectedRunName)
      throws Exception {
    PagedRunsFilter f = new PagedRunsFilter();
    f.setPageNo(0);
    f.setPageSize(10);
    f.setElementName(elementName);
    f.setElementType(elementType);
    f.setPath(path);
    f.setTriggerFilter(List.of(trigger));
    Reply r = client.postJson(df + "/monitor/runs", f, Credential.APP);
    MonitorRunResp page = data(ok(r, step), new TypeReference<MonitorRunResp>() {});
    expect(
        page.totalCount == 1 && page.totalPage == 1 && page.runs.size() == 1 && page.successCount == 1,
        step + " lists exactly one " + trigger + " run of " + elementName,
        r.body);
    RunInfo run = page.runs.get(0);
    expect(
        expectedId.equals(run.runId)
            && "SUCCESS".equals(run.runStatus)
            && trigger.equals(run.triggerType)
            && run.endTime != null
            && run.initiator != null,
        step + " lists run " + expectedId + " as a finished " + trigger + " SUCCESS",
        r.body);
    if (expectedRunName != null) {
      expect(
          expectedRunName.equals(run.runName) && "1".equals(run.version),
          step + " names the run " + expectedRunName + " from version 1",
          r.body);
    }
    pass(step, run.runId);
  }

  private String scriptExternalRunSync() throws Exception {
    GreetParameter p = new GreetParameter();
    p.name = "ada";
    Reply r =
        client.postJson(
            sp
                + "/external/greet/run-sync"
                + SluiceClient.query(Map.of("path", SCRIPTS, "timeout", "" + WAIT_S)),
            p,
            Credential.APP);
    expect(r.httpStatus == 200, "external run-sync answers HTTP 200", r.httpStatus);
    expect("SUCCESS".equals(r.header("x-task-status")), "external run-sync x-task-status SUCCESS", r.headers.map() + " " + r.body);
    // The external run-sync answers the script's own value, not an envelope (docs/errors.md).
    expectJson(client.mapper.readTree(r.body), GREET_RESULT, "external run-sync of greet");
    String taskId = r.header("x-task-id");
    expect(taskId != null && !taskId.isEmpty(), "external run-sync names its task in x-task-id", r.headers.map());
    pass("script-external-run-sync", taskId);
    return taskId;
  }

  private void scriptResult(String taskId) throws Exception {
    Reply r =
        client.get(
            sp + "/script/result/" + taskId + SluiceClient.query(Map.of("timeout", "" + WAIT_S)),
            Credential.APP);
    expectJson(ok(r, "script result").data, GREET_RESULT, "script result of greet");
    pass("script-result", taskId);
  }

  private void scriptRunSync() throws Exception {
    ScriptRunSyncRequest req = new ScriptRunSyncRequest();
    req.elementName = "score";
    req.path = SCRIPTS;
    req.parameter = client.mapper.readTree(ORDERS_RESULT);
    req.timeout = WAIT_S;
    Reply r = client.postJson(sp + "/script/run-sync", req, Credential.INTERNAL);
    expectJson(ok(r, "script run-sync").data, SCORED_RESULT, "script run-sync of score");
    expect("SUCCESS".equals(r.header("x-task-status")), "script run-sync x-task-status SUCCESS", r.headers.map());
    pass("script-run-sync", r.header("x-task-id"));
  }

  private String scriptRun() throws Exception {
    ScriptRunRequest req = new ScriptRunRequest();
    req.elementName = "score";
    req.path = SCRIPTS;
    req.parameter = client.mapper.readTree(ORDERS_RESULT);
    Reply r = client.postJson(sp + "/script/run", req, Credential.INTERNAL);
    String taskId = ok(r, "script run").data.asText();
    expect(!taskId.isEmpty() && taskId.equals(r.header("x-task-id")), "script run answers its task ID in data and x-task-id", r.body);
    pass("script-run", taskId);
    return taskId;
  }

  private void scriptLifespan(String taskId) throws Exception {
    Reply r =
        client.get(
            sp + "/script/lifespan/" + taskId + SluiceClient.query(Map.of("timeout", "" + WAIT_S)),
            Credential.APP);
    Lifespan l = data(ok(r, "script lifespan"), new TypeReference<Lifespan>() {});
    expect(l.success && "scoring 2\n".equals(l.stdout) && "".equals(l.stderr), "lifespan of score: success, its print, no stderr", r.body);
    expectJson(l.retval, SCORED_RESULT, "lifespan retval of score");
    pass("script-lifespan", taskId);
  }

  // ---- graphs and parameters ----

  /**
   * A flow's graph built from the request classes: "orders" cleans the orders (input, transform,
   * output); "scored" also runs the uploaded score script on them. Every field left unset goes out
   * as null, which the deploy reads as absent (docs/flow-graph.md): a vertex's name, retries,
   * retryDelayMs, timeoutSeconds and continueOnError, the output's config, the script locator's
   * elementType, folderId and elementId, the script node's code, an edge's id and when.
   */
  private static Graph flow(String name) {
    InputConfig input = new InputConfig();
    input.schema = Map.of("type", "object", "required", List.of("orders"));
    TransformConfig clean = new TransformConfig();
    clean.operators =
        List.of(
            new ExprOperator("f1", "orders"),
            new FilterOperator("f2", "amount > 0"),
            new MapOperator("m1", Map.of("total", "amount * qty")));
    List<Vertex> vertexes = new ArrayList<>();
    vertexes.add(new Vertex("in", "input", input));
    vertexes.add(new Vertex("clean", "transform", clean));
    if (name.equals("scored")) {
      ScriptConfig score = new ScriptConfig();
      score.element = new ElementRef("score", SCRIPTS);
      vertexes.add(new Vertex("score", "script", score));
    }
    vertexes.add(new Vertex("out", "output", null));
    Graph g = new Graph();
    g.vertexes = vertexes;
    g.edges = new ArrayList<>();
    for (int i = 1; i < vertexes.size(); i++) {
      g.edges.add(new Edge(vertexes.get(i - 1).id, vertexes.get(i).id));
    }
    return g;
  }

  /**
   * configure with its defaults written out, as a team's form would send them: a manual trigger
   * (its cron fields null), no error handler (email, bot and custom null), the system run timeout
   * (seconds null), detailed logs, the default file cleanup (days null), no prelude.
   */
  private static Configure configure() {
    Configure c = new Configure();
    c.triggers = List.of(Trigger.manual());
    c.errorHandlers = new ErrorHandlers();
    c.runNameTemplate = "${elementName}-${param.tag}";
    c.runTimeout = new RunTimeout("system");
    c.logContent = "DETAILED";
    c.fileCleanup = new FileCleanup("default");
    return c;
  }

  private static OrdersParameter orders(String tag) {
    OrdersParameter p = new OrdersParameter();
    p.orders = List.of(new Order(2, 3), new Order(0, 9), new Order(5, 1));
    p.tag = tag;
    return p;
  }

  /** Each order's unset note reaches the flow as null and stays in its records. */
  static final String ORDERS_RESULT =
      "[{\"amount\":2,\"qty\":3,\"note\":null,\"total\":6},{\"amount\":5,\"qty\":1,\"note\":null,\"total\":5}]";

  static final String SCORED_RESULT =
      "[{\"amount\":2,\"qty\":3,\"note\":null,\"total\":6,\"score\":60},"
          + "{\"amount\":5,\"qty\":1,\"note\":null,\"total\":5,\"score\":50}]";

  /** greet.py echoes the keys it got: the unset note arrives as None. */
  static final String GREET_RESULT =
      "{\"greeting\":\"hello ada\",\"keys\":[\"name\",\"note\"],\"note\":null}";

  // ---- checks ----

  private Envelope ok(Reply r, String what) throws Exception {
    expect(r.httpStatus == 200, what + " answers HTTP 200", r.httpStatus + " " + r.body);
    Envelope e;
    try {
      e = client.envelope(r);
    } catch (Exception ex) {
      throw new Mismatch(what + " answers an envelope {status, code, message, data}; got " + r.body + " (" + ex.getMessage() + ")");
    }
    expect(e.status && e.code == 0 && "success".equals(e.message), what + " succeeds (status true, code 0)", r.body);
    return e;
  }

  private <T> T data(Envelope e, TypeReference<T> type) {
    try {
      return client.mapper.convertValue(e.data, type);
    } catch (IllegalArgumentException ex) {
      throw new Mismatch("data does not read as " + type.getType() + ": " + ex.getMessage());
    }
  }

  private void expectJson(JsonNode got, String expected, String what) throws Exception {
    JsonNode want = client.mapper.readTree(expected);
    expect(want.equals(got), what + " is " + expected, got);
  }

  private static void expect(boolean condition, String what, Object got) {
    if (!condition) throw new Mismatch(what + "; got " + got);
  }

  private void pass(String step, String id) {
    steps++;
    System.out.println("ok " + step + (id == null ? "" : " " + id));
  }
}
