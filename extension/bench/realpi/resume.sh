#!/usr/bin/env bash
# Resumes the bench's session files in real Pi, print mode (pi --session F -p),
# against a fake model on loopback, and prints one JSON line per request:
# context-fold's context_with_system handler time, its session_start time,
# and the time Pi takes from session_start to the first request.
#
#   node extension/bench/adapter.bench.ts --only=resumeFolded3000,resumeCold3000 --reps=1 --keep=/tmp/cf-keep
#   extension/bench/realpi/resume.sh /tmp/cf-keep resumeFolded3000 5
#
# FAKE_LLM is an OpenAI-compatible fake server script (node FILE PORT LOGDIR);
# by default the workplace's Pi example beside the repository.
set -euo pipefail
keep=$1 section=$2 reps=${3:-5}
root=$(cd "$(dirname "$0")/../../.." && pwd)
fake=${FAKE_LLM:-$root/../shared/pi/e2e-example/fake-llm.mjs}
. <(cd "$root" && .ci/setup-pi.sh 2>/dev/null)
work=$(mktemp -d)
trap 'kill $fakepid 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/agent" "$work/home" "$work/cwd"
port=18093
cat >"$work/agent/models.json" <<JSON
{"providers":{"fake":{"baseUrl":"http://127.0.0.1:$port/v1","api":"openai-completions","apiKey":"dummy","models":[{"id":"fake-model","name":"Fake Model","reasoning":false,"input":["text"],"contextWindow":1000000,"maxTokens":4096,"cost":{"input":1,"output":2,"cacheRead":0.1,"cacheWrite":1.25}}]}}}
JSON
echo '{"defaultProvider":"fake","defaultModel":"fake-model","quietStartup":true,"compaction":{"enabled":true,"reserveTokens":16384,"keepRecentTokens":20000}}' >"$work/agent/settings.json"
"$CONTEXTFOLD_NODE" "$fake" $port "$work/fakelogs" >/dev/null 2>&1 &
fakepid=$!
for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
for _ in $(seq 1 "$reps"); do
	rm -rf "$work/sess" "$work"/fakelogs/* && cp -r "$keep/$section" "$work/sess"
	f=$(ls "$work"/sess/*.jsonl)
	sed -i "1s|\"cwd\":\"[^\"]*\"|\"cwd\":\"$work/cwd\"|" "$f" # Pi resumes only in the session's directory
	(cd "$work/cwd" && env -i PATH=/usr/bin:/bin HOME="$work/home" TMPDIR="$work" PI_CODING_AGENT_DIR="$work/agent" \
		PI_OFFLINE=1 PI_SKIP_VERSION_CHECK=1 PI_TELEMETRY=0 TIMING_LOG="$work/timing.jsonl" CONTEXTFOLD_BIN="$root/bin/contextfold" \
		"$CONTEXTFOLD_NODE" "$CONTEXTFOLD_PI_DIR/dist/bundle/cli.js" --mode text -p --model fake/fake-model --session "$f" \
		--no-extensions -e "$root/extension/bench/realpi/before.ts" -e "$root" -e "$root/extension/bench/realpi/after.ts" \
		--no-skills --no-prompt-templates --no-context-files --no-themes --no-mcp "go on with the next failing test" >"$work/pi.out" 2>&1) || { echo "pi failed:" >&2; tail -5 "$work/pi.out" >&2; }
done
cat "$work/timing.jsonl"
