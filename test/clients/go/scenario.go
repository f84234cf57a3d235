package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

type Scenario struct {
	client   *Client
	df, sp   string
	fixtures string
	started  time.Time
	steps    int
}

func (s *Scenario) passed(step, id string) {
	s.steps++
	if id != "" {
		fmt.Printf("ok %s %s\n", step, id)
	} else {
		fmt.Printf("ok %s\n", step)
	}
}

func (s *Scenario) Run() {
	s.upload()
	s.deploy("orders")
	s.deploy("scored")
	s.activate("orders")
	s.activate("scored")

	asyncRun := s.runAsync()
	s.runResult(asyncRun)
	syncRun := s.runSync()
	s.runBadParameter()
	s.listRuns("list-runs-async", "orders", "DPL", flows, "ASYNC", asyncRun, "orders-async")
	s.listRuns("list-runs-sync", "scored", "DPL", flows, "SYNC", syncRun, "scored-sync")

	externalTask := s.scriptExternalRunSync()
	s.scriptResult(externalTask)
	s.scriptRunSync()
	asyncTask := s.scriptRun()
	s.scriptLifespan(asyncTask)
	s.listRuns("list-tasks", "greet", "PY", scripts, "SYNC", externalTask, "")
}

// ---- the scenario's data ----

// The orders of a run: int64 IDs past 2^53 (as a bigint column holds them) and times with
// nanoseconds and a zone offset, as time.Time writes them.
func orders(tag string) OrdersParameter {
	placed := time.Date(2024, 3, 1, 9, 30, 0, 123456789, time.FixedZone("CET", 3600))
	return OrdersParameter{
		Orders: []Order{
			{ID: 1789012345678901234, Amount: 2, Qty: 3, PlacedAt: placed},
			{ID: 1789012345678901235, Amount: 0, Qty: 9, PlacedAt: placed.Add(1500 * time.Millisecond)},
			{ID: 1789012345678901237, Amount: 5, Qty: 1, PlacedAt: placed.Add(time.Minute + 7)},
		},
		Tag: tag,
	}
}

// cleanOrders is what the orders flow answers: the zero amount filtered out, totals added.
func cleanOrders() []CleanOrder {
	o := orders("").Orders
	return []CleanOrder{{o[0], 6}, {o[2], 5}}
}

func scoredOrders() []ScoredOrder {
	var out []ScoredOrder
	for _, c := range cleanOrders() {
		out = append(out, ScoredOrder{c, c.Total * 10})
	}
	return out
}

var greetResult = GreetResult{Greeting: "hello ada", Keys: []string{"name", "note"}, Note: nil}

// ---- checks ----

func envelope(r *Reply, what string) Envelope {
	expect(r.StatusCode == 200, what+" answers HTTP 200", fmt.Sprintf("%d %s", r.StatusCode, r.Body))
	var keys map[string]json.RawMessage
	expect(json.Unmarshal(r.Body, &keys) == nil, what+" answers a JSON object", r.Body)
	expect(sameKeys(keys, "status", "code", "message", "data"),
		what+" answers an envelope {status, code, message, data}", r.Body)
	var e Envelope
	expect(strict(r.Body, &e) == nil, what+" answers an envelope", r.Body)
	return e
}

func ok(r *Reply, what string) json.RawMessage {
	e := envelope(r, what)
	expect(e.Status && e.Code == 0 && e.Message == "success", what+" succeeds (status true, code 0)", r.Body)
	return e.Data
}

// into reads data strictly into v: a field v does not declare, or a wrong type, is a mismatch.
func into(data []byte, v any, what string) {
	if err := strict(data, v); err != nil {
		panic(&Mismatch{fmt.Sprintf("%s: %v; got %s", what, err, data)})
	}
}

// same compares what encoding/json writes for both: time.Time values of one instant and offset
// and equal structs write the same text.
func same(got, want any) bool {
	a, errA := json.Marshal(got)
	b, errB := json.Marshal(want)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

func js(v any) string { return string(must(json.Marshal(v))) }

func sameKeys(m map[string]json.RawMessage, keys ...string) bool {
	got := make([]string, 0, len(m))
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(keys)
	return strings.Join(got, ",") == strings.Join(keys, ",")
}

func waitQuery(extra url.Values) url.Values {
	q := url.Values{"timeout": {strconv.Itoa(waitS)}}
	for k, v := range extra {
		q[k] = v
	}
	return q
}

// ---- steps ----

func (s *Scenario) upload() {
	names := []string{"score", "greet"}
	r := must(s.client.Upload(s.sp+"/file/batch-upload",
		[]string{s.fixture("score.py"), s.fixture("greet.py")},
		map[string]string{"path": scripts, "overwrite": strconv.FormatBool(false)}, InternalToken))
	var items []UploadItem
	into(ok(r, "upload"), &items, "upload items")
	expect(len(items) == 2, "upload answers one item per file", r.Body)
	for i, name := range names {
		want := UploadItem{FilePath: scripts + "/" + name, Status: 0, Message: "created"}
		expect(items[i] == want, fmt.Sprintf("upload item %d is %s status 0 created", i, want.FilePath), r.Body)
	}
	s.passed("upload", items[0].FilePath+" "+items[1].FilePath)
}

// flow builds a graph from structs: "orders" cleans the orders (input, transform, output);
// "scored" also runs the uploaded score script on them. omitempty leaves out every unset field
// (a vertex's name, retries, retryDelayMs, timeoutSeconds, continueOnError, the output's config,
// the script locator's elementType, folderId and elementId, the script's code, an edge's id and
// when); the expressions' > is written \u003e.
func flow(name string) *Graph {
	vertexes := []Vertex{
		{ID: "in", Type: "input", Config: &InputConfig{Schema: map[string]any{
			"type": "object", "required": []string{"orders"},
		}}},
		{ID: "clean", Type: "transform", Config: &TransformConfig{Operators: []any{
			ExprOperator{ID: "f1", Type: "expr", Expr: "orders"},
			ExprOperator{ID: "f2", Type: "filter", Expr: "amount > 0"},
			MapOperator{ID: "m1", Type: "map", Fields: map[string]string{"total": "amount * qty"}},
		}}},
	}
	if name == "scored" {
		vertexes = append(vertexes, Vertex{ID: "score", Type: "script",
			Config: &ScriptConfig{Element: &ElementRef{ElementName: "score", Path: scripts}}})
	}
	vertexes = append(vertexes, Vertex{ID: "out", Type: "output"})
	var edges []Edge
	for i := 1; i < len(vertexes); i++ {
		edges = append(edges, Edge{Source: vertexes[i-1].ID, Target: vertexes[i].ID})
	}
	return &Graph{Vertexes: vertexes, Edges: edges}
}

// configure with its defaults written out, as a team's form sends them: a manual trigger (no
// cron fields), no error handler ({}), the system run timeout, detailed logs, the default file
// cleanup, no prelude.
func configure() *Configure {
	return &Configure{
		Triggers:        []Trigger{{Type: "manual"}},
		ErrorHandlers:   &ErrorHandlers{},
		RunNameTemplate: "${elementName}-${param.tag}",
		RunTimeout:      &RunTimeout{Type: "system"},
		LogContent:      "DETAILED",
		FileCleanup:     &FileCleanup{Type: "default"},
	}
}

func (s *Scenario) deploy(name string) {
	req := DeployRequest{
		ElementName:  name,
		RevisionName: "r1",
		Flow:         flow(name),
		Configure:    configure(),
		ElementType:  "DPL",
		Path:         flows,
		Description:  map[string]string{"en": name + " from the Go client"},
	}
	r := must(s.client.PostJSON(s.df+"/flow/deploy", nil, req, AppToken))
	var results []ValidationResult
	into(ok(r, "deploy "+name), &results, "deploy "+name+" results")
	for _, v := range results {
		expect(v.Severity == nil || *v.Severity < 2, "deploy "+name+" has no errors", r.Body)
	}
	s.passed("deploy-"+name, "")
}

func (s *Scenario) activate(name string) {
	r := must(s.client.PostJSON(s.df+"/flow/activate", nil, ElementRef{ElementName: name, Path: flows}, AppToken))
	var state string
	into(ok(r, "activate "+name), &state, "activate "+name)
	expect(state == "APPROVED", "activate "+name+" answers APPROVED", r.Body)
	s.passed("activate-"+name, "")
}
