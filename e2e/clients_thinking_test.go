package e2e

// Real coding-agent CLIs through the folding proxy with a model that thinks
// (fakellm.ClientSession.Thinking: one reasoning block on every reply), on
// the strict fake: Anthropic signatures bound to the thinking text and, on
// a preserved-thinking model, to the block's prefix; Responses reasoning
// items with encrypted content, removed by a preserved-reasoning model when
// their prefix changed; Chat Completions reasoning_content, unsigned.
//
// What the clients send back (observed with these versions, direct to the
// fake; see TestClientsThinkingThroughProxy's cases):
//
//   - Claude Code 2.1.332 takes a custom --model name with a custom
//     ANTHROPIC_BASE_URL. It replays every thinking block (and
//     redacted_thinking block) it received, signature (data) included, in
//     every later request. On claude-fable-5-1-fake it sends thinking
//     {"type":"adaptive","display":"updates"}, output_config
//     {"effort":"high"}, and after every tool result a role "system"
//     message: "<total_tokens>N tokens left</total_tokens>" plus, in the
//     newest one only, a batching reminder ("First privately list what you
//     need next; ..."), which it removes from the older ones. That edit
//     changes the prefix of the next thinking block, so the strict fake
//     rejects it even without a proxy; Claude Code then logs "[thinking]
//     prefix-lock rejection: stripped N of N thinking block(s) (all) and
//     retrying" and retries without any thinking. With
//     CLAUDE_CODE_TOASTY_THIMBLE=0 the reminder is gone and the fake
//     accepts every replayed block. On claude-opus-4-1-fake it sends
//     thinking {"budget_tokens":31999,"type":"enabled","display":"updates"}
//     and no system messages after tool results. Both: context_management
//     {"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}; no
//     thinking.block_binding and no binding beta unless it takes the base
//     URL for first-party (see claudePreservedDropBlock).
//   - Claude Code 2.1.332 with -p --input-format stream-json (no prompt
//     argument) reads user messages, {"type":"user","message":{...}} lines,
//     from stdin. It reads each line as it comes: the prompts written while
//     it works on one reach the model in the next tool result's message,
//     as text blocks "The user sent a new message while you were working:
//     ...", not as user turns. A prompt written after the previous one's
//     {"type":"result"} line is a user message of its own (a string
//     content), which gets its own result line. Its input closed after
//     the last result, it exits 0.
//   - Codex 0.169.1 on gpt-preserved-fake (no catalog entry: "Unknown
//     model ... fallback model metadata", non-fatal) sends reasoning
//     {"summary":"auto"}, include ["reasoning.encrypted_content"], store
//     false, and replays every reasoning item (id, summary, "content":null,
//     encrypted_content) before its function_call in every later request.
//   - opencode 1.18.33 (@ai-sdk/openai-compatible) replays the
//     reasoning_content it streamed on each assistant message, as
//     "reasoning_content", in every later request, with no model option.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// thinkingTurns is the number of shell turns of every thinking session.
const thinkingTurns = 40

// thinkingWindow is the context window the proxy folds for: the sessions'
// ~40 outputs of ~2,500 tokens each make several fold events in it.
const thinkingWindow = "60000"

// thinkingCase is one client and model.
type thinkingCase struct {
	name  string
	c     client
	model string
	// env is more client environment.
	env map[string]string
	// holdsFolds: the proxy may legitimately keep every tool result raw (a
	// preserved-thinking model without a user turn to fold at).
	holdsFolds bool
	// clientRejects: the client's own requests get rejected by the strict
	// fake even without the proxy (see the file comment); only rejections
	// the proxy caused fail the test.
	clientRejects bool
	// optIn names the variable that must be "1" for the case to run.
	optIn string
	// redacted adds a redacted_thinking block to every reply.
	redacted bool
	// leastLoss: the proxy asks for drop_block itself, so the single long
	// turn must fold, and each fold event may cost the thinking of the
	// current tool-use cycle only (the least the rules allow).
	leastLoss bool
	// hold runs the proxy with -drop-block=false.
	hold bool
	// prompts, when > 0, runs a session of that many user prompts, fed on
	// the client's stdin (streamPrompts), of promptTurns shell calls each,
	// with the proxy folding for promptsWindow: fold events happen at the
	// user turns, and must fold invalidated thinking into text digests.
	prompts int
}

// claudePreservedDropBlock is the variable that runs the drop_block case:
// Claude Code sends thinking.block_binding {"prefix_mismatch_behavior":
// "drop_block"} and the beta only when CLAUDE_CODE_POLISHED_DEWDROP=drop
// and it takes the base URL for first-party
// (_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL=1). Then it also looks up
// api.anthropic.com (remote settings, policy limits: ENOTFOUND offline,
// about 17 s of retries) and its system[0] billing header changes from
// request to request (cch=...), which the fake binds into the prefix: every
// replayed block is dropped, with or without the proxy.
const claudePreservedDropBlock = "CONTEXTFOLD_E2E_CLAUDE_DROP_BLOCK"

var thinkingCases = []thinkingCase{
	{name: "claude/preserved", c: claudeCode, model: fakellm.PreservedClaude, leastLoss: true,
		env: map[string]string{"CLAUDE_CODE_TOASTY_THIMBLE": "0"}},
	{name: "claude/preserved-held", c: claudeCode, model: fakellm.PreservedClaude, holdsFolds: true, hold: true,
		env: map[string]string{"CLAUDE_CODE_TOASTY_THIMBLE": "0"}},
	{name: "claude/preserved-user-turns", c: claudeCode, model: fakellm.PreservedClaude, prompts: 4, hold: true,
		env: map[string]string{"CLAUDE_CODE_TOASTY_THIMBLE": "0"}},
	{name: "claude/preserved-reminder", c: claudeCode, model: fakellm.PreservedClaude, holdsFolds: true, clientRejects: true},
	{name: "claude/preserved-drop-block", c: claudeCode, model: fakellm.PreservedClaude, holdsFolds: true, clientRejects: true,
		optIn: claudePreservedDropBlock,
		env:   map[string]string{"CLAUDE_CODE_TOASTY_THIMBLE": "0", "_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL": "1", "CLAUDE_CODE_POLISHED_DEWDROP": "drop"}},
	{name: "claude/thinking", c: claudeCode, model: "claude-opus-4-1-fake", redacted: true},
	{name: "codex/preserved", c: codex, model: "gpt-preserved-fake"},
	{name: "opencode/reasoning", c: opencode},
}

// promptTurns is the number of shell calls of each prompt of a session of
// several prompts (thinkingCase.prompts).
const promptTurns = 10

// promptsWindow is the context window the proxy folds for in a session of
// several prompts: its ~2,500-token outputs outgrow it within the first
// prompts, so the held folds land at the later user turns.
const promptsWindow = "40000"

// streamPrompts is Claude Code c reading its prompts from stdin, one
// stream-json user message a line, instead of the -p argument.
func streamPrompts(c client) client {
	if c.name != claudeCode.name {
		panic("streamPrompts: " + c.name + " is not Claude Code")
	}
	prepare := c.prepare
	c.prepare = func(t *testing.T, d runDir, origin string, mcp []string) (map[string]string, []string) {
		e, args := prepare(t, d, origin, mcp)
		i := slices.Index(args, clientPrompt)
		if i < 1 || args[i-1] != "-p" {
			t.Fatalf("streamPrompts: no -p %q in %q", clientPrompt, args)
		}
		args = slices.Delete(args, i, i+1)
		return e, append(args, "--input-format", "stream-json")
	}
	return c
}

// promptByPrompt feeds Claude Code n user prompts in stream-json, one
// {"type":"user","message":{...}} object a line, each once the previous one
// has its result (a {"type":"result"} line on stdout), and then ends its
// input. Written all at once, the later prompts reach the model inside the
// first tool result instead ("The user sent a new message while you were
// working: ..."), in one turn.
func promptByPrompt(n int) func(string) (string, bool) {
	sent := 0
	return func(line string) (string, bool) {
		if line != "" {
			var ev struct{ Type string }
			if json.Unmarshal([]byte(line), &ev) != nil || ev.Type != "result" {
				return "", false
			}
		}
		if sent == n {
			return "", true
		}
		sent++
		b, _ := json.Marshal(map[string]any{"type": "user",
			"message": map[string]any{"role": "user", "content": fmt.Sprintf("Prompt %d: %s", sent, clientPrompt)}})
		return string(b) + "\n", false
	}
}

// withModel is c with model (Claude Code --model, Codex's config.toml
// model; "" keeps c's) and more environment.
func withModel(c client, model string, env map[string]string) client {
	prepare := c.prepare
	c.prepare = func(t *testing.T, d runDir, origin string, mcp []string) (map[string]string, []string) {
		e, args := prepare(t, d, origin, mcp)
		for k, v := range env {
			e[k] = v
		}
		switch {
		case model == "":
		case c.name == claudeCode.name:
			args = append(args, "--model", model)
		case c.name == codex.name:
			p := filepath.Join(e["CODEX_HOME"], "config.toml")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			s := regexp.MustCompile(`(?m)^model = ".*"$`).ReplaceAllString(string(b), `model = "`+model+`"`)
			writeFile(t, p, s)
		default:
			t.Fatalf("withModel: no model switch for %s", c.name)
		}
		return e, args
	}
	return c
}

// TestClientsThinkingThroughProxy: a scripted session of thinkingTurns
// shell turns of each real client, every reply carrying one reasoning
// block, through the folding proxy on the strict fake. The client exits 0;
// the fake rejected no request (on claude/preserved-reminder, none that the
// proxy caused: the client's own edits get rejected without it); digests
// reached the upstream (on a preserved Claude, where the proxy may hold
// folds, whether they did is logged); the upstream received signed
// thinking back. The case of several prompts (claude/preserved-user-turns)
// also needs every prompt answered, every fold event at a user turn and
// thinking folded into text digests where the client sent that thinking;
// how many is logged. Every rejection is attributed: the first part of the
// rejected block's prefix that differs from when the block was minted,
// and whether the client's own requests differ there too.
func TestClientsThinkingThroughProxy(t *testing.T) {
	for _, tc := range thinkingCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.optIn != "" && os.Getenv(tc.optIn) != "1" {
				t.Skipf("set %s=1 to run it (it looks up api.anthropic.com and takes ~20 s)", tc.optIn)
			}
			c := withModel(tc.c, tc.model, tc.env)
			o := runOpts{
				session: fakellm.ClientSession{Turns: thinkingTurns, Thinking: true},
				proxy:   true, proxyArgs: []string{"-window", thinkingWindow},
			}
			if tc.prompts > 0 {
				c = streamPrompts(c)
				o.session = fakellm.ClientSession{TurnsPerPrompt: promptTurns, Thinking: true}
				o.proxyArgs = []string{"-window", promptsWindow}
				o.converse = promptByPrompt(tc.prompts)
			}
			if tc.redacted {
				o.wrap = withRedacted
			}
			if tc.hold {
				o.proxyArgs = append(o.proxyArgs, "-drop-block=false")
			}
			r := runSession(t, c, o)
			st := thinkingStats(r.Requests)
			rej := attributeRejections(r)
			thoughts, misplaced := thinkingDigests(r)
			t.Logf("%s: %d requests, %d rejected (%d by the proxy's edits alone), %d fold events (%d at a user turn), %d codes folded, "+
				"%d thinking blocks replayed, %d dropped by the fake (%d distinct), %d thinking blocks folded to text digests; $%.4f at Anthropic's prices",
				tc.name, len(r.Requests), len(rej), countProxy(rej), st.foldEvents, st.atPrompt, st.codes, st.signed, st.dropped, st.droppedBlocks, thoughts, totalCost(r.Requests))
			for _, x := range rej {
				t.Logf("  rejected #%d: %s\n    %s", x.seq, x.err, x.why)
			}
			if len(st.eventDrops) > 0 && tc.c.name == claudeCode.name {
				t.Logf("%s: thinking blocks the provider dropped at each fold event %v; the least the rules allow (the current cycle's) %v",
					tc.name, st.eventDrops, st.eventLeast)
			}
			if tc.leastLoss {
				if st.foldEvents == 0 {
					t.Error("no fold event in the long turn: the proxy held its folds")
				}
				for i := range st.eventDrops {
					if st.eventDrops[i] > st.eventLeast[i] {
						t.Errorf("fold event %d: the provider dropped %d thinking blocks, more than the current cycle's %d", i+1, st.eventDrops[i], st.eventLeast[i])
					}
				}
			}
			for _, m := range misplaced {
				t.Errorf("a thinking digest upstream where the client sent no such thinking: %s", m)
			}
			if dump := os.Getenv("CONTEXTFOLD_E2E_DUMP"); dump != "" {
				dumpRun(t, filepath.Join(dump, strings.ReplaceAll(tc.name, "/", "-")), r)
			}
			if r.ExitCode != 0 || r.TimedOut {
				t.Fatalf("exit %d (timed out %v)\n--- stdout\n%s\n--- stderr\n%s", r.ExitCode, r.TimedOut, tail(r.Stdout, 3000), tail(r.Stderr, 3000))
			}
			if !strings.Contains(r.Stdout, fakellm.ClientFinal) {
				t.Errorf("no %s in the output:\n%s", fakellm.ClientFinal, tail(r.Stdout, 3000))
			}
			for _, x := range rej {
				if x.proxy || !tc.clientRejects {
					t.Errorf("the fake rejected request #%d: %s\n    %s", x.seq, x.err, x.why)
				}
			}
			if st.signed == 0 {
				t.Error("the upstream never received thinking back: nothing was checked")
			}
			switch {
			case st.codes > 0:
			case tc.holdsFolds:
				t.Logf("%s: no digest reached the upstream: the proxy held every fold", tc.name)
			default:
				t.Error("no digest reached the upstream")
			}
			if tc.prompts > 0 {
				for p := 1; p <= tc.prompts; p++ {
					if f := fakellm.ClientPromptFinal(p, promptTurns); !strings.Contains(r.Stdout, f) {
						t.Errorf("prompt %d: no %q in the output", p, f)
					}
				}
				if st.atPrompt != st.foldEvents {
					t.Errorf("%d of %d fold events reached the upstream inside a tool-use cycle, not at a user turn",
						st.foldEvents-st.atPrompt, st.foldEvents)
				}
				if thoughts == 0 {
					t.Error("no invalidated thinking was folded to a text digest")
				}
			}
		})
	}
}

// thinkingDigests counts the distinct thinking digests the upstream
// received: Anthropic assistant text blocks holding a {#code FOLDED} tag.
// Each must stand where the client's request (the tap's, in the same
// order) had a thinking block, and quote the start of its text; misplaced
// lists those that do not.
func thinkingDigests(r clientResult) (n int, misplaced []string) {
	codes := map[string]bool{}
	for k, q := range r.Requests {
		if q.API != fakellm.Anthropic {
			continue
		}
		for i, m := range antMessages(q.Body) {
			if m.Role != "assistant" {
				continue
			}
			for j, bl := range antBlocks(m.Content) {
				var x struct{ Type, Text string }
				json.Unmarshal(bl, &x)
				sub := foldTag.FindStringSubmatch(x.Text)
				if x.Type != "text" || sub == nil {
					continue
				}
				codes[sub[1]] = true
				var sent struct{ Type, Thinking string }
				if k < len(r.Sent) {
					if ms := antMessages(r.Sent[k].Body); i < len(ms) {
						if bs := antBlocks(ms[i].Content); j < len(bs) {
							json.Unmarshal(bs[j], &sent)
						}
					}
				}
				gist := sent.Thinking[:min(len(sent.Thinking), 40)]
				if sent.Type != "thinking" || !strings.Contains(x.Text, gist) {
					misplaced = append(misplaced, fmt.Sprintf("#%d messages.%d.content.%d: %q, the client sent a %s block %q",
						q.Seq, i, j, x.Text, sent.Type, gist))
				}
			}
		}
	}
	return len(codes), misplaced
}

// antMessage is one message of an Anthropic request body.
type antMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func antMessages(body []byte) []antMessage {
	var b struct {
		Messages []antMessage `json:"messages"`
	}
	json.Unmarshal(body, &b)
	return b.Messages
}

// withRedacted makes every reply of script with thinking carry a
// redacted_thinking block after it, its data minted from the turn.
func withRedacted(script fakellm.Script) fakellm.Script {
	return redactor{script}
}

type redactor struct{ fakellm.Script }

func (r redactor) Reply(req *fakellm.Request) fakellm.Reply {
	rep := r.Script.Reply(req)
	if len(rep.Thinking) > 0 {
		rep.Thinking = append(rep.Thinking, fmt.Sprintf("%shidden reasoning of turn %d", fakellm.RedactedPrefix, fakellm.ClientTurn(req)))
	}
	return rep
}

// Summary implements fakellm.Summarizer when the wrapped script does.
func (r redactor) Summary(req *fakellm.Request) string {
	if s, ok := r.Script.(fakellm.Summarizer); ok {
		return s.Summary(req)
	}
	return fakellm.DefaultSummaryText
}

// thinkingRun is what a run's upstream requests show.
type thinkingRun struct {
	// foldEvents counts requests holding fold codes the previous request
	// did not, atPrompt those of them that end with a user prompt (no
	// tool-use cycle open); codes the distinct codes seen.
	foldEvents, atPrompt, codes int
	// signed counts the signed thinking the upstream received back
	// (Anthropic thinking and redacted_thinking blocks, Responses
	// reasoning items with encrypted content) or, on Chat Completions, the
	// reasoning_content of assistant messages.
	signed int
	// eventDrops are, for each fold event, the thinking blocks the fake
	// dropped for the first time on its request; eventLeast the signed
	// thinking of that request's current tool-use cycle (its last
	// assistant message), which an event inside the cycle cannot keep.
	eventDrops, eventLeast []int
	// dropped counts the fake's input_transformations, reported again on
	// every request that replays a dropped block; droppedBlocks counts the
	// distinct blocks (Responses item ids, Anthropic block paths).
	dropped, droppedBlocks int
}

func thinkingStats(reqs []fakellm.Recorded) thinkingRun {
	var st thinkingRun
	seen, prev, drops := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, q := range reqs {
		cur := map[string]bool{}
		for _, m := range q.Messages {
			if m.Role != "tool" {
				continue
			}
			for _, sub := range foldTag.FindAllStringSubmatch(m.Content, -1) {
				cur[sub[1]] = true
			}
		}
		fresh := 0
		for _, d := range q.Dropped {
			if !drops[d.ID+" "+d.Path] {
				fresh++
			}
		}
		for code := range cur {
			if !prev[code] {
				st.foldEvents++
				if endsWithPrompt(&q.Request) {
					st.atPrompt++
				}
				st.eventDrops = append(st.eventDrops, fresh)
				st.eventLeast = append(st.eventLeast, cycleThinking(q.API, q.Body))
				break
			}
		}
		for code := range cur {
			seen[code] = true
		}
		prev = cur
		st.signed += signedThinking(q.API, q.Body)
		st.dropped += len(q.Dropped)
		for _, d := range q.Dropped {
			drops[d.ID+" "+d.Path] = true
		}
	}
	st.codes = len(seen)
	st.droppedBlocks = len(drops)
	return st
}

// cycleThinking counts the signed thinking of an Anthropic request's
// last assistant message: the current tool-use cycle's.
func cycleThinking(api fakellm.API, body []byte) int {
	if api != fakellm.Anthropic {
		return 0
	}
	ms := antMessages(body)
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == "assistant" {
			n := 0
			for _, bl := range antBlocks(ms[i].Content) {
				var x struct{ Type, Signature, Data string }
				json.Unmarshal(bl, &x)
				if x.Type == "thinking" && x.Signature != "" || x.Type == "redacted_thinking" && x.Data != "" {
					n++
				}
			}
			return n
		}
	}
	return 0
}

// endsWithPrompt reports whether req's last message other than system
// ones is a user prompt (fakellm.UserPrompt).
func endsWithPrompt(req *fakellm.Request) bool {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role != "system" {
			return fakellm.UserPrompt(req, i)
		}
	}
	return false
}

// signedThinking counts the signed thinking a request body carries back.
func signedThinking(api fakellm.API, body []byte) int {
	n := 0
	switch api {
	case fakellm.Anthropic:
		var b struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &b)
		for _, m := range b.Messages {
			var blocks []struct{ Type, Signature, Data string }
			if m.Role != "assistant" || json.Unmarshal(m.Content, &blocks) != nil {
				continue
			}
			for _, bl := range blocks {
				if (bl.Type == "thinking" && bl.Signature != "") || (bl.Type == "redacted_thinking" && bl.Data != "") {
					n++
				}
			}
		}
	case fakellm.Responses:
		var b struct {
			Input []struct {
				Type             string `json:"type"`
				EncryptedContent string `json:"encrypted_content"`
			} `json:"input"`
		}
		json.Unmarshal(body, &b)
		for _, it := range b.Input {
			if it.Type == "reasoning" && it.EncryptedContent != "" {
				n++
			}
		}
	case fakellm.OpenAI:
		var b struct {
			Messages []struct {
				Role             string `json:"role"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &b)
		for _, m := range b.Messages {
			if m.Role == "assistant" && m.ReasoningContent != "" {
				n++
			}
		}
	}
	return n
}

// rejection is one request the fake refused, and why.
type rejection struct {
	seq int
	err string
	// proxy: the proxy alone made the request fail: the client sent the
	// rejected block's prefix as it was when the block was minted, and the
	// upstream got it changed (or the rejection is not a prefix mismatch).
	proxy bool
	why   string
}

func countProxy(rs []rejection) int {
	n := 0
	for _, r := range rs {
		if r.proxy {
			n++
		}
	}
	return n
}

// antBoundRE is the fake's prefix-mismatch rejection.
var antBoundRE = regexp.MustCompile("^messages\\.(\\d+)\\.content\\.(\\d+): Invalid `signature` in `thinking` block\\. The block is bound to a different conversation")

// attributeRejections lists the requests the fake refused. For an
// Anthropic prefix mismatch on messages.i.content.j it finds the request
// the block was minted for (by its signature) and compares the block's
// prefix, as the fake computes it, in the upstream's two requests and in
// the client's two (the tap's, in the same order): the first differing
// part is the proxy's when the client's requests agree there.
func attributeRejections(r clientResult) []rejection {
	var out []rejection
	for k, q := range r.Requests {
		if q.Status == http.StatusOK {
			continue
		}
		msg := q.ParseError
		if q.Error != nil {
			msg = q.Error.Message
		} else if msg == "" {
			msg = q.Reply.ErrorMessage
		}
		out = append(out, rejection{seq: q.Seq, err: fmt.Sprintf("%d %s", q.Status, msg)})
		last := &out[len(out)-1]
		m := antBoundRE.FindStringSubmatch(msg)
		if q.API != fakellm.Anthropic || m == nil {
			last.why = "not a prefix mismatch: not attributed"
			last.proxy = true // anything else the proxy must not produce either
			continue
		}
		if len(r.Sent) != len(r.Requests) {
			last.why = fmt.Sprintf("the tap saw %d requests, the fake %d: not attributed", len(r.Sent), len(r.Requests))
			last.proxy = true
			continue
		}
		i, _ := strconv.Atoi(m[1])
		j, _ := strconv.Atoi(m[2])
		last.proxy, last.why = attributePrefix(r, k, i, j)
	}
	return out
}

// attributePrefix explains why block (i, j) of request k failed its
// prefix check; proxy reports whether the proxy alone changed the prefix.
func attributePrefix(r clientResult, k, i, j int) (proxy bool, why string) {
	q := r.Requests[k]
	sig := antBlockField(q.Body, i, j, "signature")
	p := -1
	for n := 0; n < k; n++ {
		if r.Requests[n].Status == http.StatusOK && slices.Contains(r.Requests[n].Signatures, sig) {
			p = n
			break
		}
	}
	if p < 0 {
		return true, "the block's signature was minted by no earlier request"
	}
	up := firstDiff(antMintPrefix(r.Requests[p].Body), antBlockPrefix(q.Body, i, j))
	cl := firstDiff(antMintPrefix(r.Sent[p].Body), antBlockPrefix(r.Sent[k].Body, i, j))
	switch {
	case up.at < 0:
		// The thinking shown before the block is not the one it recorded.
		same := slices.Equal(antSignatures(q.Body), antSignatures(r.Sent[k].Body))
		return !same, fmt.Sprintf("block minted for #%d; its prefix is unchanged upstream, the thinking shown before it is not the one it recorded "+
			"(the upstream's thinking blocks are the client's: %v)", r.Requests[p].Seq, same)
	case cl.at < 0:
		return true, fmt.Sprintf("block minted for #%d; the proxy changed its prefix first at %s (the client sent it unchanged)",
			r.Requests[p].Seq, up)
	case cl.at > up.at:
		return false, fmt.Sprintf("block minted for #%d; the proxy changed its prefix first at %s, and the client changed it too, at %s",
			r.Requests[p].Seq, up, cl)
	default:
		return false, fmt.Sprintf("block minted for #%d; the client changed its prefix first at %s",
			r.Requests[p].Seq, cl)
	}
}

// antUnit is one part of an Anthropic thinking block's bound prefix, as
// the fake computes it: a tool, a system block, a message header (every
// field but content and output_config), a content block other than
// thinking, each canonical (sorted keys, no cache_control).
type antUnit struct {
	canon string
	msg   int // -1 for tools and system
	role  string
	what  string
}

func (u antUnit) String() string {
	switch u.msg {
	case -1:
		return u.what
	case -2:
		return "the reply's assistant header"
	}
	return fmt.Sprintf("messages.%d (%s) %s", u.msg, u.role, u.what)
}

// antUnits returns the prefix units of a request body, in order, up to
// (not including) content block j of message i; i < 0 means all.
func antUnits(body []byte, i, j int) []antUnit {
	var b struct {
		Tools    []json.RawMessage `json:"tools"`
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
	}
	json.Unmarshal(body, &b)
	var out []antUnit
	for n, tl := range b.Tools {
		out = append(out, antUnit{canon: antCanon(tl), msg: -1, what: fmt.Sprintf("tools.%d", n)})
	}
	for n, sb := range antBlocks(b.System) {
		out = append(out, antUnit{canon: antCanon(sb), msg: -1, what: fmt.Sprintf("system.%d", n)})
	}
	for mi, raw := range b.Messages {
		if i >= 0 && mi > i {
			break
		}
		var m map[string]json.RawMessage
		json.Unmarshal(raw, &m)
		var role string
		json.Unmarshal(m["role"], &role)
		content := m["content"]
		delete(m, "content")
		head, _ := json.Marshal(m)
		out = append(out, antUnit{canon: antCanon(head), msg: mi, role: role, what: "header"})
		for bj, bl := range antBlocks(content) {
			if mi == i && bj >= j {
				break
			}
			var t struct{ Type string }
			json.Unmarshal(bl, &t)
			if t.Type == "thinking" || t.Type == "redacted_thinking" {
				continue
			}
			out = append(out, antUnit{canon: antCanon(bl), msg: mi, role: role, what: fmt.Sprintf("content.%d (%s)", bj, t.Type)})
		}
	}
	return out
}

// antMintPrefix is the prefix a block minted in reply to body is bound to:
// the whole request, then the reply's assistant header.
func antMintPrefix(body []byte) []antUnit {
	u := antUnits(body, -1, 0)
	return append(u, antUnit{canon: antCanon([]byte(`{"role":"assistant"}`)), msg: -2, role: "assistant", what: "header"})
}

// antBlockPrefix is block (i, j)'s prefix in body.
func antBlockPrefix(body []byte, i, j int) []antUnit { return antUnits(body, i, j) }

// diffAt is where two prefixes first differ: the part of each there.
type diffAt struct {
	at       int // -1: equal
	was, now antUnit
}

// String names the parts: "messages.3 (user) content.0 (tool_result)",
// or "<the part minted with>, now <the part now>" when they differ.
func (d diffAt) String() string {
	if w, n := d.was.String(), d.now.String(); w != n {
		return w + ", now " + n
	}
	return d.now.String()
}

// firstDiff finds the first part where was (the prefix a block was minted
// with) and now (its prefix in a later request) differ.
func firstDiff(was, now []antUnit) diffAt {
	end := antUnit{msg: -1, what: "the end of the prefix"}
	for n := 0; n < max(len(was), len(now)); n++ {
		switch {
		case n >= len(was):
			return diffAt{n, end, now[n]}
		case n >= len(now):
			return diffAt{n, was[n], end}
		case was[n].canon != now[n].canon:
			return diffAt{n, was[n], now[n]}
		}
	}
	return diffAt{at: -1}
}

// antBlocks returns a content value as blocks: a string is one text block.
func antBlocks(raw json.RawMessage) []json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
		return []json.RawMessage{b}
	}
	var out []json.RawMessage
	json.Unmarshal(raw, &out)
	return out
}

// antCanon re-encodes JSON with sorted keys, without cache_control
// anywhere and without a top-level output_config.
func antCanon(raw []byte) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	if m, ok := v.(map[string]any); ok {
		delete(m, "output_config")
	}
	b, _ := json.Marshal(stripKey(v, "cache_control"))
	return string(b)
}

func stripKey(v any, key string) any {
	switch t := v.(type) {
	case map[string]any:
		delete(t, key)
		for k, x := range t {
			t[k] = stripKey(x, key)
		}
	case []any:
		for n, x := range t {
			t[n] = stripKey(x, key)
		}
	}
	return v
}

// antSignatures lists the signatures (redacted data) of a body's thinking
// blocks, in order.
func antSignatures(body []byte) []string {
	var b struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &b)
	var out []string
	for _, m := range b.Messages {
		for _, bl := range antBlocks(m.Content) {
			var x struct{ Type, Signature, Data string }
			json.Unmarshal(bl, &x)
			switch x.Type {
			case "thinking":
				out = append(out, x.Signature)
			case "redacted_thinking":
				out = append(out, x.Data)
			}
		}
	}
	return out
}

// antBlockField returns a string field of content block j of message i.
func antBlockField(body []byte, i, j int, field string) string {
	var b struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &b)
	if i >= len(b.Messages) {
		return ""
	}
	blocks := antBlocks(b.Messages[i].Content)
	if j >= len(blocks) {
		return ""
	}
	var m map[string]any
	json.Unmarshal(blocks[j], &m)
	s, _ := m[field].(string)
	return s
}

// dumpRun writes a run's requests under dir: NNN-sent.json (the client's
// body, from the tap), NNN-upstream.json (what the fake received) and
// requests.txt (status, error, dropped blocks), plus the client's output.
func dumpRun(t *testing.T, dir string, r clientResult) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var idx strings.Builder
	for k, q := range r.Requests {
		if k < len(r.Sent) {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d-sent.json", q.Seq)), r.Sent[k].Body, 0o644)
		}
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d-upstream.json", q.Seq)), q.Body, 0o644)
		fmt.Fprintf(&idx, "#%d %s status %d thinking %d dropped %v", q.Seq, q.Model, q.Status, len(q.Reply.Thinking), q.Dropped)
		if q.Error != nil {
			fmt.Fprintf(&idx, " error %s", q.Error.Message)
		}
		idx.WriteByte('\n')
	}
	os.WriteFile(filepath.Join(dir, "requests.txt"), []byte(idx.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "stdout"), []byte(r.Stdout), 0o644)
	os.WriteFile(filepath.Join(dir, "stderr"), []byte(r.Stderr), 0o644)
	t.Logf("dumped the requests to %s", dir)
}

// TestAntPrefixParts checks the prefix the attribution compares against
// the fake's rules: cache_control, output_config, a string content for one
// text block and thinking blocks do not count; a tool result's text does.
func TestAntPrefixParts(t *testing.T) {
	mint := []byte(`{"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"Bash"}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},{"role":"system","output_config":{"effort":"high"},"content":[{"type":"text","text":"env","cache_control":{"type":"ephemeral"}}]}]}`)
	later := []byte(`{"system":[{"type":"text","text":"S"}],"tools":[{"name":"Bash"}],` +
		`"messages":[{"role":"user","content":"go"},{"role":"system","content":"env"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"a","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"out"}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"u","signature":"v"}]}]}`)
	if d := firstDiff(antMintPrefix(mint), antBlockPrefix(later, 2, 0)); d.at >= 0 {
		t.Errorf("the same prefix differs at %s", d)
	}
	if got := antSignatures(later); !slices.Equal(got, []string{"s", "v"}) {
		t.Errorf("signatures %q", got)
	}
	folded := []byte(strings.Replace(string(later), `"content":"out"`, `"content":"{#abc123 FOLDED} out"`, 1))
	base := antUnits(later, -1, 0)
	d := firstDiff(append(base[:len(base)-1:len(base)-1], antUnit{canon: antCanon([]byte(`{"role":"assistant"}`)), msg: -2}), antBlockPrefix(folded, 4, 0))
	if d.at < 0 || d.now.String() != "messages.3 (user) content.0 (tool_result)" {
		t.Errorf("a folded tool result: diff %d at %s", d.at, d)
	}
}
