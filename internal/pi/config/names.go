package config

import (
	"encoding/json"
	"fmt"
	"strings"
)

// EnvVar is a CONTEXTFOLD_* variable read outside the settings table.
type EnvVar struct {
	Name string
	What string // who reads it, for what
}

// OtherEnv lists every CONTEXTFOLD_* variable that is not a knob. The
// adapter sends the engine all of CONTEXTFOLD_*, and a name in neither this
// list nor Knobs is reported as unknown; TestKnownEnvCoversSource fails when
// the source reads a name missing here.
var OtherEnv = []EnvVar{
	{"CONTEXTFOLD_BIN", "adapter: the engine binary to run"},
	{"CONTEXTFOLD_ENGINE_TIMEOUT_MS", "adapter: how long a request waits for the engine"},
	{"CONTEXTFOLD_DEBUG", "engine: one stderr line per request"},
	{"CONTEXTFOLD_CPUPROFILE", "engine: write a CPU profile to this file"},
	{"CONTEXTFOLD_DUMP", "engine: append each request's outgoing messages to this file"},
	{"CONTEXTFOLD_LAUNCHER", "the contextfold launcher (extension/cli.js): set for the engine it starts, so a launcher never starts another"},
	// Development: set by .ci/setup-pi.sh and the test suites, and so often
	// present in a developer's shell that runs Pi.
	{"CONTEXTFOLD_CACHE", ".ci/setup-pi.sh: its download cache"},
	{"CONTEXTFOLD_NODE", "tests: the node binary"},
	{"CONTEXTFOLD_TSC", "tests: the TypeScript compiler"},
	{"CONTEXTFOLD_PI_CLI", "tests: Pi's cli.js"},
	{"CONTEXTFOLD_PI_DIR", "tests: Pi's package directory"},
	{"CONTEXTFOLD_REPORT_SHOTS", "tests: keep the report pages' screenshots in this folder"},
	{"CONTEXTFOLD_PG_URL", "tests: the PostgreSQL server the store's tests use instead of a throw-away cluster"},
	{"CONTEXTFOLD_E2E", "tests: run the end-to-end suite"},
	{"CONTEXTFOLD_BENCH", "tests: run the benchmarks"},
	{"CONTEXTFOLD_DIST", "tests: the packaged distribution to test"},
	{"CONTEXTFOLD_PROBE", "e2e: the harness's environment probe"},
	{"CONTEXTFOLD_CLAUDE", "tests: the Claude Code binary (.ci/setup-clients.sh)"},
	{"CONTEXTFOLD_CODEX", "tests: the Codex binary (.ci/setup-clients.sh)"},
	{"CONTEXTFOLD_OPENCODE", "tests: the opencode binary (.ci/setup-clients.sh)"},
	{"CONTEXTFOLD_OPENCODE_SEED", "tests: opencode's pre-installed config directory"},
	{"CONTEXTFOLD_E2E_DUMP", "e2e: write the thinking runs' request bodies to this directory"},
	{"CONTEXTFOLD_E2E_CLAUDE_DROP_BLOCK", "e2e: also run Claude Code with drop_block (it looks up api.anthropic.com)"},
	{"CONTEXTFOLD_E2E_HELD_RUN", "e2e: also run the long preserved-thinking turn through the proxy holding its folds"},
	{"CONTEXTFOLD_TTFB_SAMPLES", "benchmarks: write every time-to-first-byte sample to this directory"},
	{"CONTEXTFOLD_TTFB_UPLINK_MBPS", "benchmarks: the upstream reads request bodies no faster than this"},
	{"CONTEXTFOLD_REAL_UPLINK_MBPS", "benchmarks: the provider-like upstream's uplink, in MB/s"},
	{"CONTEXTFOLD_REAL_THINK_MS", "benchmarks: the provider-like upstream's time to its first event"},
	{"CONTEXTFOLD_REAL_TOKENS", "benchmarks: the provider-like upstream's token events"},
	{"CONTEXTFOLD_REAL_TOKEN_MS", "benchmarks: the gap between the provider-like upstream's token events"},
	{"CONTEXTFOLD_LOAD_CONVS", "benchmarks: the load test's concurrent conversations"},
	{"CONTEXTFOLD_LOAD_LINES", "benchmarks: the lines of the load test's tool outputs"},
}

// KnownEnv returns every CONTEXTFOLD_* name context-fold reads, knobs
// first.
func KnownEnv() []string {
	var out []string
	for _, k := range Knobs {
		out = append(out, k.Env)
	}
	for _, e := range OtherEnv {
		out = append(out, e.Name)
	}
	return out
}

// envPrefix starts every variable the adapter passes on.
const envPrefix = "CONTEXTFOLD_"

// unknownEnv warns once per CONTEXTFOLD_* variable that nothing reads.
func unknownEnv(env map[string]string) []string {
	known := KnownEnv()
	var warn []string
	for _, name := range sortedKeys(env) {
		if !strings.HasPrefix(name, envPrefix) || contains(known, name) {
			continue
		}
		w := name + " is not a context-fold variable; ignoring it"
		if near := nearest(name, known, strings.ToUpper); near != "" {
			w += " — did you mean " + near + "?"
		}
		warn = append(warn, w)
	}
	return warn
}

// unknownKeys warns once per key of the settings file that is not a
// setting. Keys starting with _ or $ (comments, $schema) are left alone.
func unknownKeys(doc map[string]json.RawMessage) []string {
	known := []string{providerIdleKey}
	for _, k := range Knobs {
		known = append(known, k.Key)
	}
	var warn []string
	for _, key := range sortedKeys(doc) {
		if contains(known, key) || strings.HasPrefix(key, "_") || strings.HasPrefix(key, "$") {
			continue
		}
		w := fmt.Sprintf("%s %q is not a context-fold setting; ignoring it", FileName, key)
		if near := nearest(key, known, strings.ToLower); near != "" {
			w += fmt.Sprintf(" — did you mean %q?", near)
		}
		warn = append(warn, w)
	}
	return warn
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// nearest returns the candidate closest to name by edit distance (letters
// compared after fold, a transposition counting as one edit), or "" when
// none is close: at most 1 edit for names under 4 characters, 2 under 10,
// 3 beyond.
func nearest(name string, candidates []string, fold func(string) string) string {
	a := fold(strings.TrimPrefix(name, envPrefix))
	best, bestD := "", 1<<30
	for _, c := range candidates {
		b := fold(strings.TrimPrefix(c, envPrefix))
		if d := distance(a, b); d < bestD {
			best, bestD = c, d
		}
	}
	limit := 3
	switch n := len([]rune(a)); {
	case n < 4:
		limit = 1
	case n < 10:
		limit = 2
	}
	if bestD > limit {
		return ""
	}
	return best
}

// distance is the optimal-string-alignment edit distance: insertions,
// deletions, substitutions and adjacent transpositions, each one edit.
func distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}
