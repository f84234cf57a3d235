package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

func (s *Scenario) runAsync() string {
	req := RunRequest{ElementName: "orders", Path: flows, Parameter: orders("async")}
	r := must(s.client.PostJSON(s.df+"/run", nil, req, AppToken))
	var runID string
	into(ok(r, "run"), &runID, "run")
	expect(runID != "" && r.Header.Get("X-Run-Id") == runID, "run answers its ID in data and x-run-id",
		fmt.Sprintf("%s x-run-id %s", r.Body, r.Header.Get("X-Run-Id")))
	s.passed("run-async", runID)
	return runID
}

func (s *Scenario) runResult(runID string) {
	r := must(s.client.Get(s.df+"/run/"+runID+"/result", waitQuery(nil), AppToken))
	var got []CleanOrder
	into(ok(r, "run result"), &got, "run result of orders")
	expect(same(got, cleanOrders()), "run result of orders is "+js(cleanOrders()), r.Body)
	s.passed("run-result", runID)
}

func (s *Scenario) runSync() string {
	req := RunSyncRequest{RunRequest: RunRequest{ElementName: "scored", Path: flows, Parameter: orders("sync")}, Timeout: waitS}
	r := must(s.client.PostJSON(s.df+"/run-sync", nil, req, AppToken))
	var got []ScoredOrder
	into(ok(r, "run-sync"), &got, "run-sync of scored")
	expect(same(got, scoredOrders()), "run-sync of scored is "+js(scoredOrders()), r.Body)
	runID := r.Header.Get("X-Run-Id")
	expect(runID != "", "run-sync names its run in x-run-id", r.Header)
	s.passed("run-sync", runID)
	return runID
}

// runBadParameter: the input node requires orders, an error envelope read like any other answer;
// and an int64 ID written as a plain JSON number past 2^53, which a JavaScript reader would round,
// is refused naming it rather than run with another ID (docs/errors.md, "How fields are read").
func (s *Scenario) runBadParameter() {
	req := RunSyncRequest{RunRequest: RunRequest{ElementName: "orders", Path: flows,
		Parameter: map[string]any{"tag": "no orders"}}, Timeout: waitS}
	r := must(s.client.PostJSON(s.df+"/run-sync", nil, req, AppToken))
	e := envelope(r, "run-sync without orders")
	expect(!e.Status && e.Code == 400 && string(e.Data) == "null",
		"a parameter without orders is the 400 envelope", r.Body)

	raw := map[string]any{"orders": []RawOrder{{ID: 1789012345678901234, Amount: 2, Qty: 3}}, "tag": "raw"}
	req.Parameter = raw
	r = must(s.client.PostJSON(s.df+"/run-sync", nil, req, AppToken))
	e = envelope(r, "run-sync with an int64 ID as a number")
	expect(!e.Status && e.Code == 400 && string(e.Data) == "null" &&
		strings.Contains(e.Message, "body.parameter.orders.0.id") && r.Header.Get("X-Run-Id") == "",
		"an integer past 2^53 in the parameter is the 400 envelope naming body.parameter.orders.0.id", r.Body)
	s.passed("run-bad-parameter", "")
}

func (s *Scenario) listRuns(step, elementName, elementType, path, trigger, wantID, wantRunName string) {
	desc := false
	f := PagedRunsFilter{
		PageNo: 0, PageSize: 10, ElementName: elementName, ElementType: elementType, Path: path,
		TriggerFilter: []string{trigger},
		// Created since the scenario began (epoch ms, an int64 from time.Time), newest first.
		ColFilters: []ColFilter{{Name: "createTime", From: s.started.UnixMilli()}},
		OrderBy:    []OrderBy{{Name: "createTime", Asc: &desc}},
	}
	r := must(s.client.PostJSON(s.df+"/monitor/runs", nil, f, AppToken))
	data := ok(r, step)
	var keys map[string]json.RawMessage
	into(data, &keys, step)
	var page MonitorRunResp
	into(data, &page, step+" answers exactly the fields of MonitorRunResp")
	expect(sameKeys(keys, "totalCount", "totalPage", "runs", "queuedCount", "startedCount", "successCount",
		"failureCount", "canceledCount"), step+" answers exactly the fields of MonitorRunResp", r.Body)
	expect(page.TotalCount == 1 && page.TotalPage == 1 && len(page.Runs) == 1 && page.SuccessCount == 1,
		fmt.Sprintf("%s lists exactly one %s run of %s", step, trigger, elementName), r.Body)
	run := page.Runs[0]
	expect(run.RunID == wantID && run.RunStatus == "SUCCESS" && run.TriggerType == trigger &&
		run.EndTime != nil && run.Initiator != nil,
		fmt.Sprintf("%s lists run %s as a finished %s SUCCESS", step, wantID, trigger), r.Body)
	if wantRunName != "" {
		expect(run.RunName == wantRunName && run.Version == "1",
			fmt.Sprintf("%s names the run %s from version 1", step, wantRunName), r.Body)
	}
	s.checkTimes(step, run, r.Body)
	s.passed(step, run.RunID)
}

// checkTimes reads a run's epoch milliseconds as time.Time: created after the scenario began,
// started after that, ended after that and not in the future, its duration from start to end.
func (s *Scenario) checkTimes(step string, run RunInfo, body []byte) {
	expect(run.CreateTime != nil && run.StartTime != nil && run.EndTime != nil && run.Duration != nil,
		step+" gives the run's createTime, startTime, endTime and duration", body)
	created, started, ended := time.UnixMilli(*run.CreateTime), time.UnixMilli(*run.StartTime), time.UnixMilli(*run.EndTime)
	expect(!created.Before(s.started.Truncate(time.Millisecond)) && !started.Before(created) &&
		!ended.Before(started) && !ended.After(time.Now()),
		fmt.Sprintf("%s: created %s, started and ended in that order, since %s", step, created, s.started), body)
	expect(*run.Duration == *run.EndTime-*run.StartTime, step+": duration is endTime - startTime", body)
}

func (s *Scenario) scriptExternalRunSync() string {
	q := waitQuery(url.Values{"path": {scripts}})
	r := must(s.client.PostJSON(s.sp+"/external/greet/run-sync", q, GreetParameter{Name: "ada"}, AppToken))
	expect(r.StatusCode == 200, "external run-sync answers HTTP 200", fmt.Sprintf("%d %s", r.StatusCode, r.Body))
	expect(r.Header.Get("X-Task-Status") == "SUCCESS", "external run-sync x-task-status SUCCESS", r.Header)
	// The external run-sync answers the script's own value, not an envelope (docs/errors.md).
	var got GreetResult
	into(r.Body, &got, "external run-sync of greet")
	expect(same(got, greetResult), "external run-sync of greet is "+js(greetResult), r.Body)
	taskID := r.Header.Get("X-Task-Id")
	expect(taskID != "", "external run-sync names its task in x-task-id", r.Header)
	s.passed("script-external-run-sync", taskID)
	return taskID
}

func (s *Scenario) scriptResult(taskID string) {
	r := must(s.client.Get(s.sp+"/script/result/"+taskID, waitQuery(nil), AppToken))
	var got GreetResult
	into(ok(r, "script result"), &got, "script result of greet")
	expect(same(got, greetResult), "script result of greet is "+js(greetResult), r.Body)
	s.passed("script-result", taskID)
}

func (s *Scenario) scriptRunSync() {
	req := ScriptRunSyncRequest{ScriptRunRequest: ScriptRunRequest{ElementName: "score", Path: scripts,
		Parameter: cleanOrders()}, Timeout: waitS}
	r := must(s.client.PostJSON(s.sp+"/script/run-sync", nil, req, InternalToken))
	var got []ScoredOrder
	into(ok(r, "script run-sync"), &got, "script run-sync of score")
	expect(same(got, scoredOrders()), "script run-sync of score is "+js(scoredOrders()), r.Body)
	expect(r.Header.Get("X-Task-Status") == "SUCCESS", "script run-sync x-task-status SUCCESS", r.Header)
	s.passed("script-run-sync", r.Header.Get("X-Task-Id"))
}

func (s *Scenario) scriptRun() string {
	req := ScriptRunRequest{ElementName: "score", Path: scripts, Parameter: cleanOrders()}
	r := must(s.client.PostJSON(s.sp+"/script/run", nil, req, InternalToken))
	var taskID string
	into(ok(r, "script run"), &taskID, "script run")
	expect(taskID != "" && r.Header.Get("X-Task-Id") == taskID, "script run answers its task ID in data and x-task-id", r.Body)
	s.passed("script-run", taskID)
	return taskID
}

func (s *Scenario) scriptLifespan(taskID string) {
	r := must(s.client.Get(s.sp+"/script/lifespan/"+taskID, waitQuery(nil), AppToken))
	var life Lifespan
	into(ok(r, "script lifespan"), &life, "script lifespan")
	var retval []ScoredOrder
	into(life.Retval, &retval, "lifespan retval")
	expect(life.Success && same(retval, scoredOrders()) && life.Stdout == "scoring 2\n" && life.Stderr == "",
		"lifespan of score: success, its value, its print, no stderr", r.Body)
	s.passed("script-lifespan", taskID)
}
