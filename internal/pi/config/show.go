package config

import (
	"fmt"
	"os"
	"strings"
)

// Lines renders the effective settings for a person: the settings file,
// then one line per setting with its file key, value and source (and the
// saved value the environment overrides, or that the active policy ignores
// it), then the warnings. path is the settings file read ("" for none).
func (r *Resolved) Lines(path string) []string {
	file := "no settings file"
	if path != "" {
		file = path
		if _, err := os.Stat(path); err != nil {
			file += " (absent: no saved settings)"
		}
	}
	out := []string{"context-fold settings · file: " + file + " · precedence: default < file < environment"}
	width := 0
	for _, v := range r.Values {
		width = max(width, len(v.Key)+3+len(v.Value))
	}
	for _, v := range r.Values {
		var src string
		switch {
		case v.Source == Env && v.Saved != "":
			src = fmt.Sprintf("environment %s (the file's %s is overridden)", v.Env, v.Saved)
		case v.Source == Env:
			src = "environment " + v.Env
		case v.Source == File:
			src = "file"
		default:
			src = "default"
		}
		if v.Ignored {
			src += fmt.Sprintf("; ignored: %s policy only", v.Only)
		}
		kv := v.Key + " = " + v.Value
		out = append(out, fmt.Sprintf("  %s%s  %s · %s", kv, strings.Repeat(" ", width-len(kv)), src, v.Label))
	}
	for _, k := range sortedKeys(r.ProviderIdle) {
		out = append(out, fmt.Sprintf("  %s.%s = %v  file · Cache idle minutes for %s", providerIdleKey, k, r.ProviderIdle[k], k))
	}
	for _, w := range r.Warnings {
		out = append(out, "⚑ "+w)
	}
	return out
}
