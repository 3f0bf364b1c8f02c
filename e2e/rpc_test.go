package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// Record is one JSON line Pi writes on stdout in RPC mode: a command
// response, a session event or an extension UI request.
type Record struct {
	// Type is "response", "agent_settled", "extension_ui_request", ...
	Type string `json:"type"`
	// ID is the command id of a response, or the dialog id of an
	// extension_ui_request.
	ID string `json:"id"`
	// Command, Success, Error and Data are set on responses.
	Command string          `json:"command"`
	Success bool            `json:"success"`
	Error   string          `json:"error"`
	Data    json.RawMessage `json:"data"`
	// Raw is the whole line.
	Raw json.RawMessage `json:"-"`
}

// UIRequest is an extension_ui_request (docs/rpc-extension-ui.md).
type UIRequest struct {
	ID          string   `json:"id"`
	Method      string   `json:"method"`
	Title       string   `json:"title"`
	Message     string   `json:"message"`
	Options     []string `json:"options"`
	Placeholder string   `json:"placeholder"`
	Prefill     string   `json:"prefill"`
	NotifyType  string   `json:"notifyType"`
	StatusKey   string   `json:"statusKey"`
	StatusText  string   `json:"statusText"`
	Timeout     int      `json:"timeout"`
	// Raw is the whole line.
	Raw json.RawMessage `json:"-"`
}

// IsDialog reports whether the request waits for an answer.
func (u UIRequest) IsDialog() bool {
	switch u.Method {
	case "select", "confirm", "input", "editor":
		return true
	}
	return false
}

// UIResponse answers a dialog. Build it with UIValue, UIConfirm or
// UICancel.
type UIResponse struct {
	value     *string
	confirmed *bool
	cancelled bool
}

// UIValue answers select, input or editor with a value.
func UIValue(v string) UIResponse { return UIResponse{value: &v} }

// UIConfirm answers confirm.
func UIConfirm(ok bool) UIResponse { return UIResponse{confirmed: &ok} }

// UICancel dismisses any dialog.
func UICancel() UIResponse { return UIResponse{cancelled: true} }

func (r UIResponse) wire(id string) map[string]any {
	m := map[string]any{"type": "extension_ui_response", "id": id}
	switch {
	case r.value != nil:
		m["value"] = *r.value
	case r.confirmed != nil:
		m["confirmed"] = *r.confirmed
	default:
		m["cancelled"] = true
	}
	return m
}

// RPCOptions configure StartRPC.
type RPCOptions struct {
	// Args are extra CLI arguments for this process.
	Args []string
	// OnDialog answers select/confirm/input/editor requests. It runs on the
	// reader goroutine, so it must not call t.Fatal. Nil cancels every
	// dialog.
	OnDialog func(UIRequest) UIResponse
}

// RPC is a running `pi --mode rpc` process. Its methods must be called from
// the test goroutine.
type RPC struct {
	env      *Env
	t        testing.TB
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   string // path of the stderr file
	onDialog func(UIRequest) UIResponse
	before   int // server requests before start

	wmu sync.Mutex // serializes stdin writes

	mu      sync.Mutex
	records []Record
	ui      []UIRequest
	eof     bool
	readErr error
	signal  chan struct{} // receives after each new record or EOF

	readerDone chan struct{}
	nextID     int
	closed     bool
	result     RPCResult
}

// RPCResult is what Close reports.
type RPCResult struct {
	ExitCode int
	Stderr   string
	// Requests are the model requests recorded while the process ran.
	Requests []fakellm.Recorded
	// Sessions are the session files after exit.
	Sessions []SessionFile
}

// StartRPC starts Pi in RPC mode in the sandbox. The process is shut down
// (Close) when the test ends if the test did not do it.
func (e *Env) StartRPC(opts RPCOptions) *RPC {
	e.T.Helper()
	args := e.Args("rpc", opts.Args...)
	cmd := e.command(context.Background(), args)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		e.T.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.T.Fatal(err)
	}
	errPath := filepath.Join(e.Root, fmt.Sprintf("rpc-stderr-%d.log", time.Now().UnixNano()))
	errFile, err := os.Create(errPath)
	if err != nil {
		e.T.Fatal(err)
	}
	cmd.Stderr = errFile
	r := &RPC{env: e, t: e.T, cmd: cmd, stdin: stdin, stderr: errPath, onDialog: opts.OnDialog,
		before: e.Server.Len(), signal: make(chan struct{}, 1), readerDone: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		errFile.Close()
		e.T.Fatalf("e2e: start pi rpc: %v", err)
	}
	errFile.Close() // the child holds its own copy
	go r.read(stdout)
	e.T.Cleanup(func() { r.Close() })
	return r
}

// read consumes stdout, splitting on LF only as Pi's framing requires.
func (r *RPC) read(stdout io.Reader) {
	defer close(r.readerDone)
	br := bufio.NewReaderSize(stdout, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(line)) > 0 {
			r.handleLine(append([]byte(nil), line...))
		}
		if err != nil {
			r.mu.Lock()
			r.eof = true
			if !errors.Is(err, io.EOF) {
				r.readErr = err
			}
			r.mu.Unlock()
			r.notify()
			return
		}
	}
}

func (r *RPC) handleLine(line []byte) {
	var rec Record
	if err := json.Unmarshal(line, &rec); err != nil {
		rec = Record{Type: "<unparsed>"}
	}
	rec.Raw = line
	if rec.Type == "extension_ui_request" {
		var u UIRequest
		json.Unmarshal(line, &u)
		u.Raw = line
		r.mu.Lock()
		r.ui = append(r.ui, u)
		r.mu.Unlock()
		if u.IsDialog() {
			resp := UICancel()
			if r.onDialog != nil {
				resp = r.onDialog(u)
			}
			r.write(resp.wire(u.ID)) // errors surface as a missing answer
		}
	}
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
	r.notify()
}

func (r *RPC) notify() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// write sends one JSON line to Pi's stdin.
func (r *RPC) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	_, err = r.stdin.Write(append(b, '\n'))
	return err
}

// Send writes a command, giving it an id ("c<n>") unless it has one, and
// returns the id. It does not wait.
func (r *RPC) Send(cmd map[string]any) string {
	r.t.Helper()
	id, _ := cmd["id"].(string)
	if id == "" {
		r.nextID++
		id = fmt.Sprintf("c%d", r.nextID)
		cmd["id"] = id
	}
	if err := r.write(cmd); err != nil {
		r.t.Fatalf("e2e: rpc write %v: %v\n%s", cmd["type"], err, r.stderrTail())
	}
	return id
}

// Mark returns a position in the record stream, for WaitFrom.
func (r *RPC) Mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.records)
}

// WaitFrom waits until a record at or after position from satisfies pred
// and returns its position and the record. It fails the test on timeout or
// when Pi exits first.
func (r *RPC) WaitFrom(from int, what string, pred func(Record) bool) (int, Record) {
	r.t.Helper()
	deadline := time.NewTimer(r.env.Config.Timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for i := from; i < len(r.records); i++ {
			if pred(r.records[i]) {
				rec := r.records[i]
				r.mu.Unlock()
				return i, rec
			}
		}
		from = len(r.records)
		eof, readErr := r.eof, r.readErr
		r.mu.Unlock()
		if eof {
			r.t.Fatalf("e2e: pi exited while waiting for %s (read error: %v)\n%s", what, readErr, r.stderrTail())
		}
		select {
		case <-r.signal:
		case <-deadline.C:
			r.t.Fatalf("e2e: timed out after %s waiting for %s; last records:\n%s\n%s",
				r.env.Config.Timeout, what, r.lastRecords(8), r.stderrTail())
		}
	}
}

// Call sends cmd and waits for its response. The response may have
// Success false; MustCall fails the test then.
func (r *RPC) Call(cmd map[string]any) Record {
	r.t.Helper()
	from := r.Mark()
	id := r.Send(cmd)
	_, rec := r.WaitFrom(from, fmt.Sprintf("response to %v %s", cmd["type"], id), func(rec Record) bool {
		return rec.Type == "response" && rec.ID == id
	})
	return rec
}

// MustCall is Call that fails the test unless the response succeeded.
func (r *RPC) MustCall(cmd map[string]any) Record {
	r.t.Helper()
	rec := r.Call(cmd)
	if !rec.Success {
		r.t.Fatalf("e2e: rpc %v failed: %s\n%s", cmd["type"], rec.Raw, r.stderrTail())
	}
	return rec
}

// Prompt sends a prompt and, when a run started or was queued, waits for
// agent_settled. It returns every record from the prompt's response to the
// settle (inclusive).
func (r *RPC) Prompt(message string) []Record {
	r.t.Helper()
	from := r.Mark()
	resp := r.MustCall(map[string]any{"type": "prompt", "message": message})
	var d struct {
		Disposition string `json:"disposition"`
	}
	json.Unmarshal(resp.Data, &d)
	if d.Disposition == "handled" {
		return []Record{resp}
	}
	end, _ := r.WaitFrom(from, "agent_settled", func(rec Record) bool { return rec.Type == "agent_settled" })
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records[from:end+1]...)
}

// Compact sends {"type":"compact"} and returns the response (Data is Pi's
// CompactionResult when Success).
func (r *RPC) Compact(customInstructions string) Record {
	r.t.Helper()
	cmd := map[string]any{"type": "compact"}
	if customInstructions != "" {
		cmd["customInstructions"] = customInstructions
	}
	return r.Call(cmd)
}

// GetState returns the get_state data.
func (r *RPC) GetState() json.RawMessage {
	r.t.Helper()
	return r.MustCall(map[string]any{"type": "get_state"}).Data
}

// GetEntries returns the session entries (get_entries) as session entries.
func (r *RPC) GetEntries() []SessionEntry {
	r.t.Helper()
	data := r.MustCall(map[string]any{"type": "get_entries"}).Data
	var d struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		r.t.Fatalf("e2e: get_entries: %v", err)
	}
	out := make([]SessionEntry, 0, len(d.Entries))
	for _, raw := range d.Entries {
		var e SessionEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			r.t.Fatalf("e2e: get_entries entry: %v", err)
		}
		e.Raw = raw
		out = append(out, e)
	}
	return out
}

// Records returns every record read so far.
func (r *RPC) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// UIRequests returns every extension_ui_request read so far.
func (r *RPC) UIRequests() []UIRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]UIRequest(nil), r.ui...)
}

// Notifications returns the notify requests read so far.
func (r *RPC) Notifications() []UIRequest {
	var out []UIRequest
	for _, u := range r.UIRequests() {
		if u.Method == "notify" {
			out = append(out, u)
		}
	}
	return out
}

// Close shuts Pi down by closing stdin (Pi then emits session_shutdown and
// exits), waits up to 30 s, kills the process group after that, and reports
// the outcome. It is idempotent.
func (r *RPC) Close() RPCResult {
	if r.closed {
		return r.result
	}
	r.closed = true
	r.wmu.Lock()
	r.stdin.Close()
	r.wmu.Unlock()
	select {
	case <-r.readerDone:
	case <-time.After(30 * time.Second):
		r.t.Errorf("e2e: pi rpc did not exit within 30s of closing stdin; killing it")
		killGroup(r.cmd)
		<-r.readerDone
	}
	r.cmd.Wait()
	r.result = RPCResult{ExitCode: r.cmd.ProcessState.ExitCode(), Stderr: r.readStderr()}
	r.result.Requests = r.env.Server.Requests()[r.before:]
	r.result.Sessions = r.env.Sessions()
	return r.result
}

func (r *RPC) readStderr() string {
	b, _ := os.ReadFile(r.stderr)
	return string(b)
}

func (r *RPC) stderrTail() string {
	return "--- pi stderr\n" + tail(r.readStderr(), 3000)
}

func (r *RPC) lastRecords(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.records[max(len(r.records)-n, 0):] {
		fmt.Fprintf(&b, "  %s\n", tail(string(rec.Raw), 400))
	}
	return b.String()
}
