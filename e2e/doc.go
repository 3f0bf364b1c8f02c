// Package e2e holds the keyless end-to-end tests of context-fold: real Pi
// (@earendil-works/pi-coding-agent 1.6.0 on Node >= 22.19) runs headless
// against the scripted fake model server of internal/testsupport/fakellm on 127.0.0.1,
// fully isolated from the user's ~/.pi and from any API key.
//
// The tests and the harness live in the _test.go files. Run them with
//
//	eval "$(.ci/setup-pi.sh)"      # exports CONTEXTFOLD_NODE and CONTEXTFOLD_PI_CLI
//	go test -race ./e2e
//
// Without CONTEXTFOLD_NODE and CONTEXTFOLD_PI_CLI the tests skip, unless
// CONTEXTFOLD_E2E=1 (as CI sets it), in which case they fail.
//
// clients_test.go runs real Claude Code, Codex and opencode the same way,
// directly against the fake and through `contextfold proxy`:
//
//	eval "$(.ci/setup-clients.sh)"  # exports CONTEXTFOLD_CLAUDE, _CODEX, _OPENCODE, _OPENCODE_SEED
//	go test -race ./e2e -run Keyless
package e2e
