package sluiceclient;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Map;

/**
 * Answer classes read by a default ObjectMapper, which fails on any field a class does not
 * declare: reading an answer into them checks that it carries exactly the documented fields
 * (docs/errors.md for the envelope, docs/monitoring.md and docs/script-service.md for the rest).
 */
public final class Responses {
  private Responses() {}

  /** {status, code, message, data}: every answer of the two services but a raw external result. */
  public static class Envelope {
    public boolean status;
    public int code;
    public String message;
    public JsonNode data;
  }

  public static class UploadItem {
    public String filePath;
    public int status;
    public String message;
  }

  public static class ValidationResult {
    public int errorCode;
    public String nodeId;
    public String nodeType;
    public String errorMessage;
    public Integer severity;
    public String operatorId;
    public String operatorType;
    public List<Object> path;
  }

  public static class RunInfo {
    public String runId;
    public String triggerType;
    public String runStatus;
    public Long duration;
    public Long createTime;
    public Long startTime;
    public Long endTime;
    public String version;
    public String runName;
    public String summary;
    public String runParam;
    public Map<String, Object> initiator;
  }

  public static class MonitorRunResp {
    public int totalCount;
    public int totalPage;
    public List<RunInfo> runs;
    public int queuedCount;
    public int startedCount;
    public int successCount;
    public int failureCount;
    public int canceledCount;
  }

  public static class Lifespan {
    public boolean success;
    public JsonNode retval;
    public String stdout;
    public String stderr;
  }
}
