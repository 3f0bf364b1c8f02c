package service

import (
	"fmt"
	"path/filepath"

	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/pi/config"
)

// ConfigView lists every setting with its effective value and source; each
// value's row and prompt are the settings menu's text.
type ConfigView struct {
	Values   []config.Value `json:"values"`
	Warnings []string       `json:"warnings,omitempty"`
	File     string         `json:"file"`
	// Lines are the effective settings with their sources, for printing
	// (headless /context-fold config; contextfold config prints the same).
	Lines []string `json:"lines"`
}

func (s *Service) configView() (*ConfigView, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	path := configFile(ss.agentDir)
	return &ConfigView{Values: ss.conf.Values, Warnings: ss.conf.Warnings, File: path, Lines: ss.conf.Lines(path)}, nil
}

// configFile is the settings file in agentDir ("" for none).
func configFile(agentDir string) string {
	if agentDir == "" {
		return ""
	}
	return filepath.Join(agentDir, config.FileName)
}

// SetParams change one saved setting.
type SetParams struct {
	Key      string            `json:"key"`
	Value    string            `json:"value"` // "" or "default" removes the saved value
	Provider string            `json:"provider,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
}

// SetResult is the settings after a change, and the confirmation to show:
// Message says what was saved and, if an environment variable overrides it
// in this session, that it does (Level "warning").
type SetResult struct {
	ConfigView
	Message string `json:"message"`
	Level   string `json:"level"`
}

// set saves a setting and applies it to future folds; frozen bytes never
// move, because committed layers are not re-planned.
func (s *Service) set(p SetParams) (*SetResult, error) {
	ss := s.s
	if ss == nil {
		return nil, errNotOpen
	}
	path := configFile(ss.agentDir)
	if path == "" {
		return nil, fmt.Errorf("no agent directory to save settings in")
	}
	if err := config.Save(path, p.Key, p.Value, p.Provider); err != nil {
		return nil, err
	}
	ss.conf = config.Load(ss.env, path)
	ss.eng.SetKnobs(ss.conf.Knobs)
	ss.eng.SetPolicy(schedule.Profile(ss.conf.Policy))
	view, _ := s.configView()
	res := &SetResult{ConfigView: *view, Level: "info"}
	var override bool
	res.Message, override = ss.conf.Saved(p.Key, p.Value, p.Provider)
	if override {
		res.Level = "warning"
	}
	return res, nil
}
