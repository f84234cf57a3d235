// Command sluiceclient is the client scenario of test/http/clients.test.ts in Go (docs/errors.md,
// "Clients as business systems write them"): net/http's default Client, bodies from structs
// through encoding/json with omitempty on the optional fields, int64 and time.Time fields as
// encoding/json writes them, the upload through mime/multipart, tokens from crypto/hmac.
//
// Upload scripts, deploy and activate two flows, run them async and sync, list runs, run scripts.
// Every answer is checked; the first mismatch is printed and the exit status is 1. Each step that
// passes prints "ok STEP [ID]".
//
// Configuration: SLUICE_URL (or the first argument), SLUICE_APP, SLUICE_SPACE, SLUICE_USER,
// SLUICE_FIXTURES_DIR (score.py and greet.py); SLUICE_APP_SECRET and SLUICE_INTERNAL_SECRET sign
// tokens (signature mode); DATAFLOW_PREFIX and SCRIPT_PREFIX as the server's.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

const (
	// Every wait asks for a bounded time: the meaning of timeout 0 is not this client's concern.
	waitS   = 60
	flows   = "/clients"
	scripts = "/clients/scripts"
)

// Mismatch is an answer other than the documented one.
type Mismatch struct{ msg string }

func (m *Mismatch) Error() string { return m.msg }

func expect(cond bool, what string, got any) {
	if !cond {
		panic(&Mismatch{fmt.Sprintf("%s; got %s", what, show(got))})
	}
}

func show(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case string:
		return x
	default:
		return fmt.Sprintf("%v", x)
	}
}

func required(name string) string {
	v := os.Getenv(name)
	if v == "" {
		panic(&Mismatch{"environment variable " + name + " is not set"})
	}
	return v
}

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func main() {
	os.Exit(run())
}

func run() (code int) {
	defer func() {
		switch e := recover().(type) {
		case nil:
		case *Mismatch:
			fmt.Fprintln(os.Stderr, "MISMATCH: "+e.msg)
			code = 1
		case error:
			fmt.Fprintln(os.Stderr, "ERROR: "+e.Error())
			code = 1
		default:
			panic(e)
		}
	}()
	url := ""
	if len(os.Args) > 1 {
		url = os.Args[1]
	} else {
		url = required("SLUICE_URL")
	}
	s := &Scenario{
		client: &Client{
			BaseURL:        url,
			App:            required("SLUICE_APP"),
			Space:          required("SLUICE_SPACE"),
			User:           required("SLUICE_USER"),
			AppSecret:      os.Getenv("SLUICE_APP_SECRET"),
			InternalSecret: os.Getenv("SLUICE_INTERNAL_SECRET"),
		},
		df:       env("DATAFLOW_PREFIX", "/dataflow-3-0"),
		sp:       env("SCRIPT_PREFIX", "/script"),
		fixtures: required("SLUICE_FIXTURES_DIR"),
		// Runs are created after this; their times are checked against it (epoch ms, one
		// second of slack for the clocks' rounding).
		started: time.Now().Add(-time.Second),
	}
	s.Run()
	fmt.Printf("done %d steps\n", s.steps)
	return 0
}

// must stops the scenario on a transport error (no answer at all).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (s *Scenario) fixture(name string) string { return filepath.Join(s.fixtures, name) }
