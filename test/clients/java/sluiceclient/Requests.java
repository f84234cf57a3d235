package sluiceclient;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Map;

/**
 * Request classes as a business system's Java team writes them: boxed fields for everything
 * optional, serialised by a default {@code new ObjectMapper()}, so every field left unset goes out
 * as {@code null} (docs/errors.md, "How fields are read"). Most are public fields; {@link
 * PagedRunsFilter} is a bean with getters and setters, the other style Jackson reads.
 */
public final class Requests {
  private Requests() {}

  /** configure (docs/flow-graph.md, "configure"): only the run name template is set. */
  public static class Configure {
    public List<Map<String, Object>> triggers;
    public Map<String, Object> errorHandlers;
    public String prelude;
    public String runNameTemplate;
    public Map<String, Object> runTimeout;
    public String logContent;
    public Map<String, Object> fileCleanup;
  }

  public static class DeployRequest {
    public String elementName;
    public String revisionName;
    /** The graph as the flow editor exported it: JSON data, not classes (see Main#flow). */
    public JsonNode flow;
    public Configure configure;
    public String elementType;
    public String folderId;
    public String path;
    public String elementId;
    public Map<String, String> description;
  }

  /** FlowElementInfo of activate and deactivate. */
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
