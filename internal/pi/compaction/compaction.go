// Package compaction reads Pi's compaction settings and resolves them for
// a model the way Pi 1.6 does (SettingsManager.getCompactionSettings): a
// per-model override first, then the ordinary setting, then Pi's default.
// The engine keeps folding ahead of the threshold these settings give, so
// that Pi's lossy compaction does not run while something can still fold.
package compaction

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/contextfold/contextfold/internal/core/wire"
)

// Pi's built-in defaults (settings-defaults.js).
const (
	DefaultReserve    = 16_384
	DefaultKeepRecent = 20_000
)

// Settings are Pi's "compaction" settings as the user wrote them; absent
// fields are nil.
type Settings struct {
	Enabled          *bool                `json:"enabled"`
	ReserveTokens    *float64             `json:"reserveTokens"`
	KeepRecentTokens *float64             `json:"keepRecentTokens"`
	ModelOverrides   map[string]Overrides `json:"modelOverrides"`
}

// Overrides are one model's token settings.
type Overrides struct {
	ReserveTokens    *float64 `json:"reserveTokens"`
	KeepRecentTokens *float64 `json:"keepRecentTokens"`
}

// Effective is what Pi applies to one model.
type Effective struct {
	Enabled    bool
	Reserve    int // Pi compacts once context tokens pass window − Reserve
	KeepRecent int
}

// Parse reads the settings object; null or absent settings are Pi's
// defaults. An invalid value is an error, as it is in Pi (which then
// refuses to compact), and the caller keeps its previous settings.
func Parse(raw []byte) (Settings, error) {
	var s Settings
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return Settings{}, fmt.Errorf("compaction settings: %w", err)
	}
	check := func(name string, v *float64) error {
		if v != nil && (*v < 0 || *v != math.Trunc(*v) || *v > 1<<53) {
			return fmt.Errorf("compaction settings: %s is %v, not a non-negative integer", name, *v)
		}
		return nil
	}
	if err := check("reserveTokens", s.ReserveTokens); err != nil {
		return Settings{}, err
	}
	if err := check("keepRecentTokens", s.KeepRecentTokens); err != nil {
		return Settings{}, err
	}
	for k, o := range s.ModelOverrides {
		if err := check("modelOverrides["+k+"].reserveTokens", o.ReserveTokens); err != nil {
			return Settings{}, err
		}
		if err := check("modelOverrides["+k+"].keepRecentTokens", o.KeepRecentTokens); err != nil {
			return Settings{}, err
		}
	}
	return s, nil
}

// For resolves the settings for model m ("provider/id" keys the override).
func (s Settings) For(m wire.Model) Effective {
	e := Effective{Enabled: true, Reserve: DefaultReserve, KeepRecent: DefaultKeepRecent}
	if s.Enabled != nil {
		e.Enabled = *s.Enabled
	}
	if s.ReserveTokens != nil {
		e.Reserve = int(*s.ReserveTokens)
	}
	if s.KeepRecentTokens != nil {
		e.KeepRecent = int(*s.KeepRecentTokens)
	}
	if o, ok := s.ModelOverrides[m.Provider+"/"+m.ID]; ok && m.Known() {
		if o.ReserveTokens != nil {
			e.Reserve = int(*o.ReserveTokens)
		}
		if o.KeepRecentTokens != nil {
			e.KeepRecent = int(*o.KeepRecentTokens)
		}
	}
	return e
}

// Reserve is the engine's Request.Reserve for model m: 0 when Pi does not
// compact on its own.
func (s Settings) Reserve(m wire.Model) int {
	e := s.For(m)
	if !e.Enabled {
		return 0
	}
	return e.Reserve
}
