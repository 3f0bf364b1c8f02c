package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// A target is the record an offline command reads: a Pi session file, or
// the file of a conversation contextfold proxy folded.
type target struct {
	path  string
	proxy bool
}

func (t target) String() string {
	if t.proxy {
		return "proxy conversation " + t.path
	}
	return "Pi session " + t.path
}

// findTarget resolves what the user named: a file (a Pi session or a proxy
// conversation, told apart by their first line), a Pi session id (as Pi
// prints it, or a unique prefix of it) found under the agent directory's
// sessions, a proxy conversation id (its file name in the store, or a
// unique prefix), or, for "", the latest session: the newest Pi session of
// the current directory and proxy conversation. store is the -store flag.
func findTarget(spec, store string) (target, error) { return resolveTarget(spec, store, true) }

// findPiSession is findTarget for a command that reads Pi sessions alone.
func findPiSession(spec string) (target, error) {
	t, err := resolveTarget(spec, "", false)
	if err == nil && t.proxy {
		return target{}, fmt.Errorf("%s is a proxy conversation; this command reads Pi sessions", t.path)
	}
	return t, err
}

func resolveTarget(spec, store string, proxy bool) (target, error) {
	if spec != "" {
		if st, err := os.Stat(spec); err == nil && !st.IsDir() {
			return fileTarget(spec)
		}
		if strings.ContainsAny(spec, `/\`) || strings.HasSuffix(spec, ".jsonl") {
			return target{}, fmt.Errorf("%s: no such file", spec)
		}
	}
	var cands []candidate
	cands = append(cands, piSessions(spec)...)
	if proxy {
		if dir, err := storeDir(store); err == nil {
			cands = append(cands, proxyConversations(dir, spec)...)
		}
	}
	if spec == "" {
		if len(cands) == 0 {
			if !proxy {
				return target{}, errors.New("no session to read: no Pi session of this directory (name a session file or id)")
			}
			return target{}, errors.New("no session to read: no Pi session of this directory and no proxy conversation (name a session file or id)")
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].mod > cands[j].mod })
		return cands[0].target, nil
	}
	switch len(cands) {
	case 0:
		return target{}, fmt.Errorf("%s: no session file, Pi session id or proxy conversation id", spec)
	case 1:
		return cands[0].target, nil
	}
	var names []string
	for _, c := range cands {
		names = append(names, filepath.Base(c.path))
	}
	return target{}, fmt.Errorf("%s names %d sessions (%s): give more of the id", spec, len(cands), strings.Join(names, ", "))
}

// fileTarget reads path's first line to tell a proxy conversation from a
// Pi session.
func fileTarget(path string) (target, error) {
	f, err := os.Open(path)
	if err != nil {
		return target{}, err
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 4096)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return target{}, err
	}
	return target{path: path, proxy: bytes.HasPrefix(line, []byte(`{"t":"conversation"`))}, nil
}

type candidate struct {
	target
	mod int64
}

// piSessionsDir is where Pi keeps its sessions by default, one folder per
// working directory: piAgentDir's sessions.
func piSessionsDir() (string, error) {
	agent, err := piAgentDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(agent, "sessions"), nil
}

// piAgentDir is Pi's agent directory: PI_CODING_AGENT_DIR (as Pi reads it,
// ~ expanded), or ~/.pi/agent.
func piAgentDir() (string, error) {
	agent := os.Getenv("PI_CODING_AGENT_DIR")
	if agent == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, ".pi", "agent"), nil
	}
	return expandHome(agent)
}

// expandHome expands a leading ~ as Pi does.
func expandHome(p string) (string, error) {
	rest, ok := strings.CutPrefix(p, "~")
	if !ok {
		return p, nil
	}
	home, err := os.UserHomeDir()
	return filepath.Join(home, rest), err
}

// piCwdFolder is the folder Pi names after a working directory under its
// sessions: the path without its first separator, every separator and
// colon a dash, between "--" (/home/me/project: --home-me-project--).
func piCwdFolder(wd string) string {
	if wd != "" && (wd[0] == '/' || wd[0] == '\\') {
		wd = wd[1:]
	}
	return "--" + strings.NewReplacer("/", "-", `\`, "-", ":", "-").Replace(wd) + "--"
}

// piSessions lists the Pi session files whose id starts with id, in every
// directory's sessions; with id "", those of the current directory. When
// PI_CODING_AGENT_SESSION_DIR moves them, Pi keeps every directory's
// sessions in that one folder, and those of the current directory are the
// ones whose header names it.
func piSessions(id string) []candidate {
	var pattern string
	flat := os.Getenv("PI_CODING_AGENT_SESSION_DIR")
	wd, wdErr := os.Getwd()
	switch {
	case flat != "":
		dir, err := expandHome(flat)
		if err != nil {
			return nil
		}
		pattern = filepath.Join(dir, "*.jsonl")
	default:
		dir, err := piSessionsDir()
		if err != nil {
			return nil
		}
		pattern = filepath.Join(dir, "*", "*.jsonl")
		if id == "" {
			if wdErr != nil {
				return nil
			}
			pattern = filepath.Join(dir, piCwdFolder(wd), "*.jsonl")
		}
	}
	paths, _ := filepath.Glob(pattern)
	var out []candidate
	for _, p := range paths {
		// <timestamp>_<id>.jsonl
		_, sid, ok := strings.Cut(strings.TrimSuffix(filepath.Base(p), ".jsonl"), "_")
		if !ok || !strings.HasPrefix(sid, id) {
			continue
		}
		if flat != "" && id == "" && (wdErr != nil || sessionCwd(p) != wd) {
			continue
		}
		if st, err := os.Stat(p); err == nil {
			out = append(out, candidate{target{path: p}, st.ModTime().UnixNano()})
		}
	}
	return out
}

// sessionCwd is the working directory a Pi session file's header names.
func sessionCwd(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, 64<<10)).ReadBytes('\n')
	var h struct {
		Type, Cwd string
	}
	if json.Unmarshal(bytes.TrimSpace(line), &h) != nil || h.Type != "session" {
		return ""
	}
	return h.Cwd
}

// proxyConversations lists the store's conversation files whose id (file
// name) starts with id.
func proxyConversations(dir, id string) []candidate {
	paths, err := foldstore.Files(dir)
	if err != nil {
		return nil
	}
	var out []candidate
	for _, p := range paths {
		if !strings.HasPrefix(filepath.Base(p), id) {
			continue
		}
		if st, err := os.Stat(p); err == nil {
			out = append(out, candidate{target{path: p, proxy: true}, st.ModTime().UnixNano()})
		}
	}
	return out
}
