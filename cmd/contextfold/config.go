package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/contextfold/contextfold/internal/pi/config"
)

func configCommand() command {
	return command{"config", []form{{"[-json]", "print the effective Pi settings and where each comes from"}},
		"Config prints the settings the Pi extension would use if started now from this shell: each " +
			"setting's file key, value and source (default, the settings file " + config.FileName + " in " +
			"Pi's agent directory — PI_CODING_AGENT_DIR, or ~/.pi/agent — or a CONTEXTFOLD_* variable), " +
			"whether the active policy ignores it, and any warning about the file or the environment. " +
			"/context-fold config prints the same in a headless Pi. -json prints the settings as JSON.",
		configCmd}
}

func configCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("config")
	asJSON := fs.Bool("json", false, "print {file, values, warnings} as JSON")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	if fs.NArg() != 0 {
		return wantArgs(stderr, "config", "no arguments", fs.Args())
	}
	dir, err := piAgentDir()
	if err != nil {
		fmt.Fprintf(stderr, "contextfold config: %v\n", err)
		return 1
	}
	path := filepath.Join(dir, config.FileName)
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "CONTEXTFOLD_") {
			env[k] = v
		}
	}
	r := config.Load(env, path)
	if *asJSON {
		b, _ := json.MarshalIndent(map[string]any{"file": path, "values": r.Values, "warnings": r.Warnings}, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	for _, l := range r.Lines(path) {
		fmt.Fprintln(stdout, l)
	}
	return 0
}
