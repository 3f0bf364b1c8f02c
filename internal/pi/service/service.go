// Package service is the engine process behind the Pi adapter: it serves the
// protocol's methods for one Pi session runtime, owns the engine and its
// files, and makes every fold event durable through the adapter before the
// event's bytes apply.
//
// Methods (adapter → engine):
//
//	open    start or restart a session: replay its persisted fold entries
//	turn    one model request: the message delta in, placements and new layers out
//	usage   (notification) an assistant response's usage, for cold detection
//	unfold  release folded blocks for good
//	recall  read folded blocks back, verified against the session file
//	status  the policy's and the engine's state
//	folded  the blocks folded now (the menu's list)
//	show    read one folded block back for the user
//
// Methods (engine → adapter):
//
//	persist append one entry to Pi's session file (pi.appendEntry)
package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/telemetry"
	"github.com/contextfold/contextfold/internal/core/wire"
	"github.com/contextfold/contextfold/internal/pi/compaction"
	"github.com/contextfold/contextfold/internal/pi/config"
	"github.com/contextfold/contextfold/internal/pi/indexfile"
	"github.com/contextfold/contextfold/internal/pi/ledger"
	"github.com/contextfold/contextfold/internal/pi/protocol"
)

// CustomType is the Pi custom entry type holding engine entries.
const CustomType = "contextfold.fold"

// persistTimeout bounds how long a fold event waits for the adapter.
const persistTimeout = 10 * time.Second

// Service serves one connection. Its methods run one at a time.
type Service struct {
	conn *protocol.Conn
	log  *slog.Logger
	now  func() time.Time

	mu  sync.Mutex
	s   *session
	cfg engine.Config
	ctx context.Context // the request being served, for calls back to the adapter
}

type session struct {
	id, file, dir  string
	eng            *engine.Engine
	index          *indexfile.Store
	sentVersion    int
	sentLayers     map[int]bool
	tm             *telemetry.Telemetry
	conf           config.Resolved
	agentDir       string
	status         policy.Status
	window         int
	dump           string
	env            map[string]string
	led            *ledger.Ledger
	parent         *parent // the session this one was handed off from
	pendingCompact int     // seq of a compaction that has not completed yet
	compactions    int
	summaries      int            // the number of the newest compaction summary rendered
	recalls        map[string]int // recall count per code (churn)
	turns          int
	recallCalls    int
	// requests counts the session's model requests, the resumed file's
	// included; events are its fold events on the active branch.
	requests   int
	events     []foldEvent
	thinking   *thinkingLog
	model      wire.Model // the newest request's model
	compaction compaction.Settings
}

// New returns a service answering on conn.
func New(conn *protocol.Conn, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{conn: conn, log: log, now: time.Now, ctx: context.Background()}
}

// Hello is the engine's first frame. The adapter runs only an engine whose
// Protocol and Version equal its own; Build and Platform name the binary in
// its messages.
type Hello struct {
	Protocol int    `json:"protocol"`
	Version  string `json:"version"`
	Build    string `json:"build"`
	Platform string `json:"platform"`
}

// Handle implements protocol.Handler.
func (s *Service) Handle(ctx context.Context, method string, params json.RawMessage) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx = ctx
	switch method {
	case "open":
		var p OpenParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, badRequest(method, err)
		}
		return s.open(p)
	case "turn":
		p, err := parseTurn(params)
		if err != nil {
			return nil, badRequest(method, err)
		}
		return s.turn(ctx, p)
	case "preload":
		p, err := parseTurn(params)
		if err != nil {
			return nil, badRequest(method, err)
		}
		return s.preload(p)
	case "usage":
		var u telemetry.Usage
		if err := json.Unmarshal(params, &u); err != nil {
			return nil, badRequest(method, err)
		}
		return s.usage(u)
	case "settled":
		return s.settled()
	case "forecast":
		var p ForecastParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, badRequest(method, err)
		}
		return s.forecast(p)
	case "modelChanged":
		if s.s != nil {
			s.s.tm.Reset()
		}
		return true, nil
	case "config":
		return s.configView()
	case "set":
		var p SetParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, badRequest(method, err)
		}
		return s.set(p)
	case "unfold":
		var p UnfoldParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, badRequest(method, err)
		}
		return s.unfold(ctx, p)
	case "recall":
		var p RecallParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, badRequest(method, err)
		}
		return s.recall(p)
	case "status":
		return s.statusView(), nil
	case "folded":
		return s.folded()
	case "show":
		var p ShowParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, badRequest(method, err)
		}
		return s.show(p)
	case "reportLimits":
		return s.reportLimits()
	case "compact":
		var p CompactParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, badRequest(method, err)
		}
		return s.compact(p)
	case "compacted":
		var p CompactedParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, badRequest(method, err)
		}
		return s.compacted(p)
	case "handoff":
		var p HandoffParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, badRequest(method, err)
		}
		return s.handoff(p)
	}
	return nil, &protocol.Error{Code: protocol.CodeNoMethod, Message: "unknown method " + method}
}

func badRequest(method string, err error) error {
	return &protocol.Error{Code: protocol.CodeBadRequest, Message: method + ": " + err.Error()}
}

// idleBatch is how many blocks one Idle call digests: small enough that a
// request arriving meanwhile waits at most a few milliseconds.
const idleBatch = 16

// Idle implements protocol.Idler: between requests it digests blocks ahead
// of need, so the request that first folds does not pay for them.
func (s *Service) Idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s == nil {
		return false
	}
	return s.s.eng.Prepare(idleBatch)
}

var errNotOpen = &protocol.Error{Code: protocol.CodeBadRequest, Message: "no session open"}

// OpenParams start a session.
type OpenParams struct {
	SessionID   string `json:"sessionId"`
	SessionFile string `json:"sessionFile,omitempty"`
	SessionDir  string `json:"sessionDir,omitempty"`
	// Entries are the data of every contextfold.fold custom entry in the
	// session file, in file order.
	Entries []json.RawMessage `json:"entries"`
	// EntryIDs, instead of Entries, name those entries by their ids in Pi's
	// session file, which the engine then reads itself (the adapter need
	// not send their bytes). It does only if SessionFile is of format
	// FileVersion and holds exactly these contextfold.fold entries, in this
	// order; otherwise it replays nothing and the result says so
	// (EntriesFromFile false), and the adapter opens again with Entries.
	EntryIDs    []string `json:"entryIds,omitempty"`
	FileVersion int      `json:"fileVersion,omitempty"`
	// Env holds the CONTEXTFOLD_* environment; AgentDir locates the saved
	// settings file (<agentDir>/context-fold.json).
	Env      map[string]string `json:"env,omitempty"`
	AgentDir string            `json:"agentDir,omitempty"`
}

// OpenResult reports the replayed state. Layers are every committed layer,
// for the adapter's cache.
type OpenResult struct {
	LastSeq   int             `json:"lastSeq"`
	Folds     int             `json:"folds"`
	Layers    []*engine.Layer `json:"layers"`
	Skipped   int             `json:"skipped"`
	IndexPath string          `json:"indexPath,omitempty"`
	Warnings  []string        `json:"warnings,omitempty"`
	Config    []config.Value  `json:"config"`
	// EntriesFromFile: the entries named by EntryIDs were read from the
	// session file and replayed.
	EntriesFromFile bool `json:"entriesFromFile,omitempty"`
}

func (s *Service) open(p OpenParams) (*OpenResult, error) {
	cfg := s.cfg
	conf := config.Load(p.Env, configFile(p.AgentDir))
	cfg.Knobs = conf.Knobs
	cfg.Policy = schedule.Profile(conf.Policy)
	// Codes are the session's own: a handoff child and its parent, or two
	// sessions of a model server that numbers its calls alike, never
	// share one.
	cfg.Scope = p.SessionID
	ss := &session{
		id: p.SessionID, file: p.SessionFile, dir: p.SessionDir, tm: telemetry.New(), conf: conf, agentDir: p.AgentDir, dump: p.Env["CONTEXTFOLD_DUMP"], env: p.Env,
		eng:        engine.New(cfg),
		index:      indexfile.Open(indexfile.Dir(p.SessionDir, p.SessionID)),
		sentLayers: map[int]bool{},
		recalls:    map[string]int{},
		thinking:   newThinkingLog(),
	}
	res := &OpenResult{IndexPath: ss.index.Path(), Warnings: conf.Warnings, Config: conf.Values}
	raws := p.Entries
	if p.EntryIDs != nil {
		raws, res.EntriesFromFile = s.entriesFromFile(ss, p.EntryIDs, p.FileVersion)
	}
	entries, bad := decodeEntries(raws)
	res.Skipped += bad
	skipped, err := ss.eng.Replay(entries)
	res.Skipped += skipped
	for _, en := range entries {
		// Only the events Replay accepted: not a voided one, nor a repeat.
		if l, ok := ss.eng.Layer(en.Seq); en.Kind == engine.KindFold && en.Thinking != nil && ok && !ss.thinking.has(en.Seq) && l != nil {
			ss.thinking.event(en.Seq, *en.Thinking, true)
		}
	}
	if err != nil {
		res.Warnings = append(res.Warnings, err.Error())
	}
	if floor, err := ss.index.Floor(); err != nil {
		res.Warnings = append(res.Warnings, err.Error())
	} else {
		ss.eng.EnsureSeqAtLeast(floor)
	}
	s.s = ss
	s.seedHistory(ss)
	ss.tm.MaskedNow = foldsOf(ss).masked
	res.LastSeq = ss.eng.LastSeq()
	res.Folds = ss.eng.Registry().Len()
	res.Layers = ss.eng.Layers()
	for _, l := range res.Layers {
		ss.sentLayers[l.Seq] = true
	}
	if res.Layers == nil {
		res.Layers = []*engine.Layer{}
	}
	return res, nil
}

// entriesFromFile returns the data of the session file's contextfold.fold
// entries if their ids are exactly ids and the file is of format version.
func (s *Service) entriesFromFile(ss *session, ids []string, version int) ([]json.RawMessage, bool) {
	if ss.file == "" {
		return nil, false
	}
	led, err := s.ledgerFor(ss, nil)
	if err != nil || led.Version() != version {
		return nil, false
	}
	cs := led.Custom(CustomType)
	if len(cs) != len(ids) {
		return nil, false
	}
	out := make([]json.RawMessage, len(cs))
	for i, e := range cs {
		if e.ID != ids[i] || e.Data == nil {
			return nil, false
		}
		out[i] = e.Data
	}
	return out, true
}

// errStaleFile answers a turn whose File names messages the session file
// does not hold (yet, or in another format): the adapter sends them instead.
var errStaleFile = &protocol.Error{Code: "stale_file", Message: "the session file does not hold the messages named"}

// fromFile returns the turn's appended messages with those named by File
// read from the session file: File[i] is message Keep+i's entry id, or nil
// where that message is the next one of Append; Append's rest follows.
func (s *Service) fromFile(ss *session, p TurnParams) ([][]byte, error) {
	if ss.file == "" {
		return nil, errStaleFile
	}
	led, err := s.ledgerFor(ss, nil)
	if err != nil || led.Version() != p.FileVersion {
		return nil, errStaleFile
	}
	out := make([][]byte, 0, len(p.File)+len(p.Append))
	next := 0
	for _, id := range p.File {
		if id == nil {
			if next >= len(p.Append) {
				return nil, &protocol.Error{Code: protocol.CodeBadRequest, Message: "turn: file names more inline messages than append holds"}
			}
			out = append(out, p.Append[next])
			next++
			continue
		}
		e, ok := led.Entry(*id)
		if !ok || e.Type != "message" || len(e.Message) == 0 || e.Message[0] != '{' {
			return nil, errStaleFile
		}
		out = append(out, e.Message)
	}
	return append(out, p.Append[next:]...), nil
}

// PreloadResult says how many messages the engine now holds.
type PreloadResult struct {
	Len int `json:"len"`
}

// preload takes the messages the next request is expected to carry (after a
// resume: the context Pi builds from its session file) without running the
// pipeline: nothing folds and nothing is placed. The adapter sends it right
// after open, so the decoding happens while the user types, and digests are
// prepared in the idle time after it; the first request then sends only
// what differs from it. Only Keep 0 is accepted: it replaces what is held.
func (s *Service) preload(p TurnParams) (*PreloadResult, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	if p.Keep != 0 {
		return nil, &protocol.Error{Code: protocol.CodeBadRequest, Message: "preload: keep must be 0"}
	}
	if p.File != nil {
		msgs, err := s.fromFile(ss, p)
		if err != nil {
			return nil, err
		}
		p.Append = msgs
	}
	start := s.now()
	ss.eng.Sync(0, p.Append)
	ss.thinking.observe(p.Append)
	s.log.Debug("preload", "messages", ss.eng.Len(), "took", s.now().Sub(start))
	return &PreloadResult{Len: ss.eng.Len()}, nil
}

// TurnParams are one request's delta.
type TurnParams struct {
	Keep int
	// File names messages in Pi's session file of format FileVersion by
	// their entry ids (see fromFile); nil entries are Append's.
	File        []*string
	FileVersion int
	Append      [][]byte
	Window      int
	Reported    int
	// Model is the model the request goes to (Pi's ctx.model).
	Model wire.Model
	// Full asks for every placement and layer (after an adapter restart).
	Full bool
	// Compaction is Pi's "compaction" settings object, sent when it
	// changed (nil: unchanged; until first sent, Pi's defaults apply).
	Compaction []byte
}

// parseTurn reads turn params without re-encoding the messages: each
// appended message keeps the exact bytes JSON.stringify produced.
func parseTurn(params []byte) (TurnParams, error) {
	var p TurnParams
	ms, err := rawjson.Object(params)
	if err != nil {
		return p, err
	}
	for _, m := range ms {
		switch m.Key {
		case "append":
			if rawjson.IsNull(m.Value) {
				continue
			}
			els, err := rawjson.ArrayOfValid(m.Value) // Object validated params whole
			if err != nil {
				return p, fmt.Errorf("append: %w", err)
			}
			p.Append = els
		case "keep":
			err = json.Unmarshal(m.Value, &p.Keep)
		case "window":
			err = json.Unmarshal(m.Value, &p.Window)
		case "model":
			if !rawjson.IsNull(m.Value) {
				err = json.Unmarshal(m.Value, &p.Model)
			}
		case "reported":
			if !rawjson.IsNull(m.Value) {
				var f float64
				err = json.Unmarshal(m.Value, &f)
				p.Reported = int(f)
			}
		case "file":
			if rawjson.IsNull(m.Value) {
				continue
			}
			els, err := rawjson.Array(m.Value)
			if err != nil {
				return p, fmt.Errorf("file: %w", err)
			}
			p.File = make([]*string, len(els))
			for i, el := range els {
				if rawjson.IsNull(el) {
					continue
				}
				id, err := rawjson.Unquote(el)
				if err != nil {
					return p, fmt.Errorf("file: %w", err)
				}
				p.File[i] = &id
			}
		case "fileVersion":
			err = json.Unmarshal(m.Value, &p.FileVersion)
		case "full":
			p.Full = rawjson.Bool(m.Value)
		case "compaction":
			p.Compaction = m.Value
		}
		if err != nil {
			return p, fmt.Errorf("%s: %w", m.Key, err)
		}
	}
	if p.Keep < 0 {
		return p, fmt.Errorf("keep %d is negative", p.Keep)
	}
	return p, nil
}

// TurnResult is what the adapter applies. Placements and Layers are sent
// only when they changed since the last result (or Full was asked: then
// every placement, and every layer unless this is the session's first turn,
// whose open result carried them); Placements nil means "unchanged".
type TurnResult struct {
	Len        int             `json:"len"`
	Version    int             `json:"version"`
	Placements *[][4]int       `json:"placements,omitempty"`
	Layers     []*engine.Layer `json:"layers,omitempty"`
	Event      *EventSummary   `json:"event,omitempty"`
	Rejected   string          `json:"rejected,omitempty"`
	Collisions []string        `json:"collisions,omitempty"`
	Status     policy.Status   `json:"status"`
	Footer     string          `json:"footer"`
	// Notice is the short notice of this request's fold event, for the
	// user (empty when there was none or fold notices are off).
	Notice string `json:"notice,omitempty"`
	// Anchor is the tool-call id of the result that ends the frozen region,
	// for a provider that caches only at marked breakpoints: the adapter
	// marks it, so the next fold event re-writes only what follows it.
	Anchor string `json:"anchor,omitempty"`
}

// EventSummary describes a committed fold event.
type EventSummary struct {
	Seq     int    `json:"seq"`
	Trigger string `json:"trigger"`
	Blocks  int    `json:"blocks"`
	Masked  int    `json:"masked"` // tokens saved
}

func (s *Service) turn(ctx context.Context, p TurnParams) (*TurnResult, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	start := s.now()
	defer func() {
		s.log.Debug("turn", "keep", p.Keep, "append", len(p.Append), "messages", ss.eng.Len(), "took", s.now().Sub(start))
	}()
	if p.Keep > ss.eng.Len() {
		return nil, &protocol.Error{Code: protocol.CodeBadRequest, Message: fmt.Sprintf("keep %d exceeds the %d messages held; resend from 0", p.Keep, ss.eng.Len())}
	}
	if p.File != nil {
		msgs, err := s.fromFile(ss, p)
		if err != nil {
			return nil, err
		}
		p.Append, p.File = msgs, nil
	}
	ss.thinking.observe(p.Append)
	if p.Model.Known() {
		ss.model = p.Model
	}
	if p.Compaction != nil {
		c, err := compaction.Parse(p.Compaction)
		if err != nil {
			// Pi itself refuses such settings; keep the last good ones.
			s.log.Warn("Pi's compaction settings are invalid; folding keeps to the previous ones", "err", err)
		} else {
			ss.compaction = c
		}
	}
	res := ss.eng.Step(engine.Request{
		Keep: p.Keep, Append: p.Append, Window: p.Window, Reported: p.Reported, Model: p.Model,
		Reserve:      ss.compaction.Reserve(ss.model),
		Cold:         ss.tm.Cold(),
		CacheCold:    ss.tm.CacheCold(s.now().UnixMilli(), ss.conf.IdleFor(ss.tm.Provider())),
		Anchored:     ss.model.CachesAtBreakpoints(),
		Paused:       ss.tm.Bridged,
		KnownVersion: ss.sentVersion, HaveVersion: !p.Full && ss.turns > 0,
	}, &journal{s: s, ss: ss, ctx: ctx})
	ss.turns++
	ss.requests++
	ss.status = res.Status
	ss.window = p.Window
	out := &TurnResult{Len: ss.eng.Len(), Version: res.Version, Status: res.Status, Collisions: res.Collisions}
	if res.Anchor != nil && ss.model.CachesAtBreakpoints() {
		out.Anchor = res.Anchor.CallID
	}
	if res.Rejected != nil {
		out.Rejected = res.Rejected.Error()
		s.log.Warn("fold event rejected; this request goes out with frozen folds only", "err", res.Rejected)
	}
	if res.Event != nil {
		saved := 0
		for _, f := range res.Event.Folds {
			if b, ok := ss.eng.Live(f.ID); ok {
				saved += b.Tokens - ss.eng.Config().Cost(f.Digest)
			}
		}
		out.Event = &EventSummary{Seq: res.Event.Seq, Trigger: string(res.Event.Trigger), Blocks: len(res.Event.Folds), Masked: saved}
		ss.thinking.event(res.Event.Seq, res.Event.Thinking, false)
		ss.tm.NoteFold(saved)
		ev := foldEvent{Seq: res.Event.Seq, Request: ss.requests, Blocks: len(res.Event.Folds), Masked: saved}
		ss.events = append(ss.events, ev)
		if ss.conf.FoldNotices {
			out.Notice = eventNotice(ev)
		}
	}
	// Derived from the layers, so replayed folds count as much as new ones.
	ss.tm.MaskedNow = foldsOf(ss).masked
	// A full turn resends every layer, except the first after open: open's
	// result carried them all.
	resend := p.Full && ss.turns > 1
	for _, l := range ss.eng.Layers() {
		if resend || !ss.sentLayers[l.Seq] {
			out.Layers = append(out.Layers, l)
			ss.sentLayers[l.Seq] = true
		}
	}
	out.Footer = s.footer(ss)
	if ss.dump != "" {
		s.writeDump(ss)
	}
	if res.Placements != nil || p.Full || res.Version != ss.sentVersion {
		ps := make([][4]int, len(res.Placements))
		for i, pl := range res.Placements {
			ps[i] = [4]int{pl.Msg, pl.Part, pl.Seq, pl.Index}
		}
		out.Placements = &ps
		ss.sentVersion = res.Version
	}
	return out, nil
}

// journal makes engine decisions durable: the seed-index record first (the
// engine's own file), then the fold entry in Pi's session file through the
// adapter. If the adapter cannot persist, the index record is voided, so a
// rejected event leaves nothing effective behind (docs/EDGES.md #23).
type journal struct {
	s   *Service
	ss  *session
	ctx context.Context
}

func (j *journal) Commit(ev *engine.Event) error {
	now := j.s.now()
	at := now.UTC().Format(time.RFC3339Nano)
	if err := j.ss.index.Append(indexfile.Record{Record: ev.Index, Session: j.ss.id, At: at}); err != nil {
		return err
	}
	indexed := j.s.now()
	defer func() {
		j.s.log.Debug("fold event committed", "seq", ev.Seq, "blocks", len(ev.Folds), "index", indexed.Sub(now), "persist", j.s.now().Sub(indexed))
	}()
	if err := j.persist(ev.Entry()); err != nil {
		if verr := j.ss.index.Void(ev.Seq, at); verr != nil {
			j.s.log.Warn("seed-index retraction failed", "seq", ev.Seq, "err", verr)
		}
		return err
	}
	// The adapter builds the layer from the entry it just persisted, so the
	// turn's result need not carry the digests a second time.
	j.ss.sentLayers[ev.Seq] = true
	return nil
}

func (j *journal) Unfold(ids []string) error {
	return j.persist(engine.UnfoldEntry(ids))
}

// PersistParams ask the adapter to append one custom entry.
type PersistParams struct {
	CustomType string       `json:"customType"`
	Data       engine.Entry `json:"data"`
}

func (j *journal) persist(en engine.Entry) error {
	ctx, cancel := context.WithTimeout(j.ctx, persistTimeout)
	defer cancel()
	var ok bool
	if err := j.s.conn.Call(ctx, "persist", PersistParams{CustomType: CustomType, Data: en}, &ok); err != nil {
		return fmt.Errorf("persist %s entry: %w", en.Kind, err)
	}
	if !ok {
		return fmt.Errorf("persist %s entry: the adapter could not append it", en.Kind)
	}
	return nil
}
