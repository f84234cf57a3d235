package sluiceclient;

import java.util.List;
import java.util.Map;

/**
 * Request classes as a business system's Java team writes them: boxed fields for everything
 * optional, serialised by a default {@code new ObjectMapper()}, so every field left unset goes out
 * as {@code null} (docs/errors.md, "How fields are read"). That includes the deploy's graph and
 * configure, down to a vertex's unset retries and a script locator's unset folderId
 * (docs/flow-graph.md). Most are public fields; {@link PagedRunsFilter} is a bean with getters and
 * setters, the other style Jackson reads.
 */
public final class Requests {
  private Requests() {}

  // ---- the flow graph (docs/flow-graph.md, "Graph") ----

  public static class Graph {
    public List<Vertex> vertexes;
    public List<Edge> edges;
  }

  /** A vertex; what is not set (name, retries, ..., an output's config) goes out as null. */
  public static class Vertex {
    public String id;
    public String type;
    public String name;
    public NodeConfig config;
    public Integer retries;
    public Integer retryDelayMs;
    public Double timeoutSeconds;
    public Boolean continueOnError;

    public Vertex() {}

    public Vertex(String id, String type, NodeConfig config) {
      this.id = id;
      this.type = type;
      this.config = config;
    }
  }

  public static class Edge {
    public String id;
    public String source;
    public String target;
    /** A JSONata condition; unset, the edge is always taken. */
    public String when;

    public Edge() {}

    public Edge(String source, String target) {
      this.source = source;
      this.target = target;
    }
  }

  /** A node's config: one class per node type (docs/flow-graph.md, "Node types"). */
  public interface NodeConfig {}

  public static class InputConfig implements NodeConfig {
    /** A JSON Schema: free-form data, not a class. */
    public Map<String, Object> schema;
  }

  public static class TransformConfig implements NodeConfig {
    public List<Operator> operators;
  }

  /** A script node runs an uploaded script ({@code element}) or inline {@code code}, not both. */
  public static class ScriptConfig implements NodeConfig {
    public ElementRef element;
    public String code;
  }

  /** A transform operator: one subclass per operator type (docs/flow-graph.md, "Transform operators"). */
  public abstract static class Operator {
    public String id;
    public String type;

    protected Operator(String id, String type) {
      this.id = id;
      this.type = type;
    }
  }

  /** {@code expr}: one JSONata expression over the whole input. */
  public static class ExprOperator extends Operator {
    public String expr;

    public ExprOperator(String id, String expr) {
      super(id, "expr");
      this.expr = expr;
    }
  }

  public static class FilterOperator extends Operator {
    public String expr;

    public FilterOperator(String id, String expr) {
      super(id, "filter");
      this.expr = expr;
    }
  }

  public static class MapOperator extends Operator {
    public Map<String, String> fields;

    public MapOperator(String id, Map<String, String> fields) {
      super(id, "map");
      this.fields = fields;
    }
  }

  // ---- configure (docs/flow-graph.md, "configure") ----

  public static class Configure {
    public List<Trigger> triggers;
    public ErrorHandlers errorHandlers;
    public String prelude;
    public String runNameTemplate;
    public RunTimeout runTimeout;
    public String logContent;
    public FileCleanup fileCleanup;
  }

  /** One class for both trigger types: a manual trigger leaves the cron fields null. */
  public static class Trigger {
    public String type;
    public String name;
    public String crontab;
    public String timezone;
    public Object parameter;

    public static Trigger manual() {
      Trigger t = new Trigger();
      t.type = "manual";
      return t;
    }
  }

  public static class ErrorHandlers {
    public EmailHandler email;
    public BotHandler bot;
    public CustomHandler custom;
  }

  public static class EmailHandler {
    public List<String> to;
    public String subject;
  }

  public static class BotHandler {
    public String webhookUrl;
    public String kind;
  }

  public static class CustomHandler {
    public ElementRef element;
  }

  /** {@code system}, or {@code customized} and {@code sentinel} with their seconds. */
  public static class RunTimeout {
    public String type;
    public Integer seconds;

    public RunTimeout() {}

    public RunTimeout(String type) {
      this.type = type;
    }
  }

  /** {@code default}, {@code keep}, {@code afterRun}, or {@code days} with its days. */
  public static class FileCleanup {
    public String type;
    public Integer days;

    public FileCleanup() {}

    public FileCleanup(String type) {
      this.type = type;
    }
  }

  public static class DeployRequest {
    public String elementName;
    public String revisionName;
    public Graph flow;
    public Configure configure;
    public String elementType;
    public String folderId;
    public String path;
    public String elementId;
    public Map<String, String> description;
  }

  /**
   * FlowElementInfo of activate and deactivate; also how a flow names an element (a script node's
   * {@code element}, a custom error handler's).
   */
  public static class ElementRef {
    public String elementName;
    public String elementType;
    public String folderId;
    public String path;
    public String elementId;

    public ElementRef() {}

    public ElementRef(String elementName, String path) {
      this.elementName = elementName;
      this.path = path;
    }
  }

  public static class RunRequest {
    public String elementName;
    public String elementType;
    public String folderId;
    public String path;
    public String elementId;
    public Object parameter;
    public Boolean inProcess;
    public String parentRunId;
  }

  public static class RunSyncRequest extends RunRequest {
    public Integer timeout;
  }

  public static class ScriptRunRequest {
    public String elementName;
    public String elementType;
    public Object parameter;
    public String folderId;
    public String path;
  }

  public static class ScriptRunSyncRequest extends ScriptRunRequest {
    public Integer timeout;
    public Boolean terminateOnTimeout;
  }

  public static class OrderBy {
    public String name;
    public Boolean asc;
  }

  public static class ColFilter {
    public String name;
    public String value;
    public String op;
    public Long from;
    public Long to;
  }

  /** PagedRunsFilter of POST /monitor/runs (docs/monitoring.md), as a bean. */
  public static class PagedRunsFilter {
    private Integer pageNo;
    private Integer pageSize;
    private String elementName;
    private String elementType;
    private String folderId;
    private String path;
    private String elementId;
    private List<String> runStatusFilter;
    private List<String> triggerFilter;
    private List<OrderBy> orderBy;
    private List<String> versionFilter;
    private String quickSearch;
    private List<ColFilter> colFilters;

    public Integer getPageNo() {
      return pageNo;
    }

    public void setPageNo(Integer pageNo) {
      this.pageNo = pageNo;
    }

    public Integer getPageSize() {
      return pageSize;
    }

    public void setPageSize(Integer pageSize) {
      this.pageSize = pageSize;
    }

    public String getElementName() {
      return elementName;
    }

    public void setElementName(String elementName) {
      this.elementName = elementName;
    }

    public String getElementType() {
      return elementType;
    }

    public void setElementType(String elementType) {
      this.elementType = elementType;
    }

    public String getFolderId() {
      return folderId;
    }

    public void setFolderId(String folderId) {
      this.folderId = folderId;
    }

    public String getPath() {
      return path;
    }

    public void setPath(String path) {
      this.path = path;
    }

    public String getElementId() {
      return elementId;
    }

    public void setElementId(String elementId) {
      this.elementId = elementId;
    }

    public List<String> getRunStatusFilter() {
      return runStatusFilter;
    }

    public void setRunStatusFilter(List<String> runStatusFilter) {
      this.runStatusFilter = runStatusFilter;
    }

    public List<String> getTriggerFilter() {
      return triggerFilter;
    }

    public void setTriggerFilter(List<String> triggerFilter) {
      this.triggerFilter = triggerFilter;
    }

    public List<OrderBy> getOrderBy() {
      return orderBy;
    }

    public void setOrderBy(List<OrderBy> orderBy) {
      this.orderBy = orderBy;
    }

    public List<String> getVersionFilter() {
      return versionFilter;
    }

    public void setVersionFilter(List<String> versionFilter) {
      this.versionFilter = versionFilter;
    }

    public String getQuickSearch() {
      return quickSearch;
    }

    public void setQuickSearch(String quickSearch) {
      this.quickSearch = quickSearch;
    }

    public List<ColFilter> getColFilters() {
      return colFilters;
    }

    public void setColFilters(List<ColFilter> colFilters) {
      this.colFilters = colFilters;
    }
  }

  /** The business parameter of the order flows; a note nobody wrote stays null. */
  public static class Order {
    public Integer amount;
    public Integer qty;
    public String note;

    public Order() {}

    public Order(Integer amount, Integer qty) {
      this.amount = amount;
      this.qty = qty;
    }
  }

  public static class OrdersParameter {
    public List<Order> orders;
    public String tag;
  }

  public static class GreetParameter {
    public String name;
    public String note;
  }
}
