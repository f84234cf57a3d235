package main

// Request and answer types as a Go team writes them against docs/: optional fields carry
// `omitempty`, so an unset field (and a zero one: false, 0, "", a nil slice or map, a nil
// pointer) is left out of the body; a struct-typed optional field is a pointer, since omitempty
// never leaves out a struct value. Answer types are read with DisallowUnknownFields, so an answer
// that carries a field they do not declare is a mismatch.

import (
	"encoding/json"
	"time"
)

// ---- request bodies ----

// ElementRef is FlowElementInfo of activate and deactivate; also how a flow names an element.
type ElementRef struct {
	ElementName string `json:"elementName"`
	ElementType string `json:"elementType,omitempty"`
	FolderID    string `json:"folderId,omitempty"`
	Path        string `json:"path,omitempty"`
	ElementID   string `json:"elementId,omitempty"`
}

// The flow graph (docs/flow-graph.md, "Graph").

type Vertex struct {
	ID              string  `json:"id"`
	Type            string  `json:"type"`
	Name            string  `json:"name,omitempty"`
	Config          any     `json:"config,omitempty"` // *InputConfig, *TransformConfig, *ScriptConfig; nil for an output
	Retries         int     `json:"retries,omitempty"`
	RetryDelayMs    int64   `json:"retryDelayMs,omitempty"`
	TimeoutSeconds  float64 `json:"timeoutSeconds,omitempty"`
	ContinueOnError bool    `json:"continueOnError,omitempty"`
}

type InputConfig struct {
	Schema map[string]any `json:"schema,omitempty"` // a JSON Schema: free-form
}

type ExprOperator struct {
	ID   string `json:"id,omitempty"`
	Type string `json:"type"`
	Expr string `json:"expr"`
}

type MapOperator struct {
	ID     string            `json:"id,omitempty"`
	Type   string            `json:"type"`
	Fields map[string]string `json:"fields"`
}

type TransformConfig struct {
	Operators []any `json:"operators"`
}

// ScriptConfig names an uploaded script (Element) or holds inline Code, not both.
type ScriptConfig struct {
	Element *ElementRef `json:"element,omitempty"`
	Code    string      `json:"code,omitempty"`
}

type Edge struct {
	ID     string `json:"id,omitempty"`
	Source string `json:"source"`
	Target string `json:"target"`
	When   string `json:"when,omitempty"` // a JSONata condition; empty, the edge is always taken
}

type Graph struct {
	Vertexes []Vertex `json:"vertexes"`
	Edges    []Edge   `json:"edges,omitempty"`
}

// configure (docs/flow-graph.md, "configure").

// Trigger is one type for both trigger kinds: a manual trigger leaves the cron fields unset.
type Trigger struct {
	Type      string `json:"type"`
	Name      string `json:"name,omitempty"`
	Crontab   string `json:"crontab,omitempty"`
	Timezone  string `json:"timezone,omitempty"`
	Parameter any    `json:"parameter,omitempty"`
}

type EmailHandler struct {
	To      []string `json:"to"`
	Subject string   `json:"subject,omitempty"`
}

type BotHandler struct {
	WebhookURL string `json:"webhookUrl"`
	Kind       string `json:"kind,omitempty"`
}

type CustomHandler struct {
	Element ElementRef `json:"element"`
}

type ErrorHandlers struct {
	Email  *EmailHandler  `json:"email,omitempty"`
	Bot    *BotHandler    `json:"bot,omitempty"`
	Custom *CustomHandler `json:"custom,omitempty"`
}

type RunTimeout struct {
	Type    string `json:"type"` // system, or customized and sentinel with their seconds
	Seconds int    `json:"seconds,omitempty"`
}

type FileCleanup struct {
	Type string `json:"type"` // default, keep, afterRun, or days with its days
	Days int    `json:"days,omitempty"`
}

type Configure struct {
	Triggers        []Trigger      `json:"triggers,omitempty"`
	ErrorHandlers   *ErrorHandlers `json:"errorHandlers,omitempty"`
	Prelude         string         `json:"prelude,omitempty"`
	RunNameTemplate string         `json:"runNameTemplate,omitempty"`
	RunTimeout      *RunTimeout    `json:"runTimeout,omitempty"`
	LogContent      string         `json:"logContent,omitempty"`
	FileCleanup     *FileCleanup   `json:"fileCleanup,omitempty"`
}

type DeployRequest struct {
	ElementName  string            `json:"elementName"`
	RevisionName string            `json:"revisionName"`
	Flow         *Graph            `json:"flow,omitempty"`
	Configure    *Configure        `json:"configure,omitempty"`
	ElementType  string            `json:"elementType,omitempty"`
	FolderID     string            `json:"folderId,omitempty"`
	Path         string            `json:"path,omitempty"`
	ElementID    string            `json:"elementId,omitempty"`
	Description  map[string]string `json:"description,omitempty"`
}

type RunRequest struct {
	ElementName string `json:"elementName,omitempty"`
	ElementType string `json:"elementType,omitempty"`
	FolderID    string `json:"folderId,omitempty"`
	Path        string `json:"path,omitempty"`
	ElementID   string `json:"elementId,omitempty"`
	Parameter   any    `json:"parameter,omitempty"`
	InProcess   bool   `json:"inProcess,omitempty"`
	ParentRunID string `json:"parentRunId,omitempty"`
}

// RunSyncRequest embeds RunRequest: encoding/json writes the embedded fields inline.
type RunSyncRequest struct {
	RunRequest
	Timeout int `json:"timeout,omitempty"` // seconds
}

type ScriptRunRequest struct {
	ElementName string `json:"elementName"`
	ElementType string `json:"elementType,omitempty"`
	Parameter   any    `json:"parameter,omitempty"`
	FolderID    string `json:"folderId,omitempty"`
	Path        string `json:"path,omitempty"`
}

type ScriptRunSyncRequest struct {
	ScriptRunRequest
	Timeout            int  `json:"timeout,omitempty"`
	TerminateOnTimeout bool `json:"terminateOnTimeout,omitempty"`
}

// OrderBy's Asc is a pointer: asc defaults to true (docs/monitoring.md), so false must be sendable.
type OrderBy struct {
	Name string `json:"name"`
	Asc  *bool  `json:"asc,omitempty"`
}

// ColFilter is one type for both filter kinds: a string column's op and value, an interval
// column's from and to in epoch milliseconds (docs/monitoring.md).
type ColFilter struct {
	Name  string `json:"name"`
	Op    string `json:"op,omitempty"`
	Value string `json:"value,omitempty"`
	From  int64  `json:"from,omitempty"`
	To    int64  `json:"to,omitempty"`
}

type PagedRunsFilter struct {
	PageNo          int         `json:"pageNo"`
	PageSize        int         `json:"pageSize"`
	ElementName     string      `json:"elementName,omitempty"`
	ElementType     string      `json:"elementType,omitempty"`
	FolderID        string      `json:"folderId,omitempty"`
	Path            string      `json:"path,omitempty"`
	ElementID       string      `json:"elementId,omitempty"`
	RunStatusFilter []string    `json:"runStatusFilter,omitempty"`
	TriggerFilter   []string    `json:"triggerFilter,omitempty"`
	OrderBy         []OrderBy   `json:"orderBy,omitempty"`
	VersionFilter   []string    `json:"versionFilter,omitempty"`
	QuickSearch     string      `json:"quickSearch,omitempty"`
	ColFilters      []ColFilter `json:"colFilters,omitempty"`
}

// The team's own data: an order from their database. Its ID is an int64 (the database's
// bigint), sent as a JSON string with the `,string` option because JSON numbers past 2^53 do not
// survive a JavaScript reader (docs/errors.md, "How fields are read"); PlacedAt is a time.Time,
// written as RFC 3339 with nanoseconds; no note is left out.
type Order struct {
	ID       int64     `json:"id,string"`
	Amount   int       `json:"amount"`
	Qty      int       `json:"qty"`
	Note     string    `json:"note,omitempty"`
	PlacedAt time.Time `json:"placedAt"`
}

// RawOrder is the same order with its ID as a plain JSON number, as encoding/json writes an
// int64 without `,string`.
type RawOrder struct {
	ID     int64 `json:"id"`
	Amount int   `json:"amount"`
	Qty    int   `json:"qty"`
}

type OrdersParameter struct {
	Orders []Order `json:"orders"`
	Tag    string  `json:"tag,omitempty"`
}

// CleanOrder is an order after the flow's transform, ScoredOrder after the score script.
type CleanOrder struct {
	Order
	Total int `json:"total"`
}

type ScoredOrder struct {
	CleanOrder
	Score int `json:"score"`
}

// GreetParameter: greet.py reads p["note"], so Note is a pointer without omitempty (null).
type GreetParameter struct {
	Name string  `json:"name"`
	Note *string `json:"note"`
}

type GreetResult struct {
	Greeting string   `json:"greeting"`
	Keys     []string `json:"keys"`
	Note     *string  `json:"note"`
}

// ---- answers ----

// Envelope is {status, code, message, data}: every answer but a raw external result.
type Envelope struct {
	Status  bool            `json:"status"`
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type UploadItem struct {
	FilePath string `json:"filePath"`
	Status   int    `json:"status"`
	Message  string `json:"message"`
}

type ValidationResult struct {
	ErrorCode    int    `json:"errorCode"`
	NodeID       string `json:"nodeId"`
	NodeType     string `json:"nodeType"`
	ErrorMessage string `json:"errorMessage"`
	Severity     *int   `json:"severity"`
	OperatorID   string `json:"operatorId"`
	OperatorType string `json:"operatorType"`
	Path         []any  `json:"path"`
}

// RunInfo's times are epoch milliseconds (int64); a time not reached yet is absent (nil).
type RunInfo struct {
	RunID       string         `json:"runId"`
	TriggerType string         `json:"triggerType"`
	RunStatus   string         `json:"runStatus"`
	Duration    *int64         `json:"duration"`
	CreateTime  *int64         `json:"createTime"`
	StartTime   *int64         `json:"startTime"`
	EndTime     *int64         `json:"endTime"`
	Version     string         `json:"version"`
	RunName     string         `json:"runName"`
	Summary     string         `json:"summary"`
	RunParam    string         `json:"runParam"`
	Initiator   map[string]any `json:"initiator"`
}

type MonitorRunResp struct {
	TotalCount    int64     `json:"totalCount"`
	TotalPage     int64     `json:"totalPage"`
	Runs          []RunInfo `json:"runs"`
	QueuedCount   int64     `json:"queuedCount"`
	StartedCount  int64     `json:"startedCount"`
	SuccessCount  int64     `json:"successCount"`
	FailureCount  int64     `json:"failureCount"`
	CanceledCount int64     `json:"canceledCount"`
}

type Lifespan struct {
	Success bool            `json:"success"`
	Retval  json.RawMessage `json:"retval"`
	Stdout  string          `json:"stdout"`
	Stderr  string          `json:"stderr"`
}
