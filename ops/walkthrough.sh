#!/usr/bin/env bash
# What a new user does first, run as the README writes it, in a fresh clone of this
# repository (its committed HEAD), so that the README cannot drift from the code:
#   1. the README's first command (venv, install, `neardup detect` on the bundled sample);
#   2. the Kafka walkthrough: the sh block after the README's `<!-- walkthrough` marker,
#      run by bash as one script (it starts and stops its own stack on the default ports);
#   3. checks of what they made: a decision for every sample record, from detect and from
#      the two serve consumers, and eval's scores of the serve run.
# CI runs it after the test suite (ops/test.sh), once the suite's stack is down.
# Usage: bash ops/walkthrough.sh [WORKDIR]   (default: a new temporary directory)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${1:-$(mktemp -d /tmp/neardup-walkthrough.XXXXXX)}"
say() { echo "[walkthrough] $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

if ! command -v cargo >/dev/null && [[ -x "$HOME/.cargo/bin/cargo" ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"  # as ops/test.sh: pip builds the native kernels
fi
# a new user's shell: the options and the stack's settings come from the README alone
# (its commands use the default ports, which must be free: stop another stack first)
for name in $(compgen -e | grep '^NEARDUP_' || true); do
  unset "$name"
done

say "cloning $ROOT into $WORK/neardup"
git clone -q "$ROOT" "$WORK/neardup"
cd "$WORK/neardup"
# the stack of the walkthrough keeps its state apart, and reuses the Kafka jars fetched
export NEARDUP_STACK_DIR="$WORK/stack"
[[ -d "$ROOT/ops/.cache" ]] && export NEARDUP_STACK_CACHE="$ROOT/ops/.cache"

first="$(awk '/^```sh$/ { getline; print; exit }' README.md | sed 's/[[:space:]]*#.*$//')"
[[ "$first" == *"neardup detect"* ]] || fail "the README's first command is not the main job: $first"
say "the first command: $first"
bash -c "$first"
detected="$(wc -l < decisions.jsonl)"
samples="$(gzip -dc tests/data/sample.jsonl.gz | grep -c .)"
[[ "$detected" == "$samples" ]] || fail "detect wrote $detected decisions for $samples records"

awk '/^<!-- walkthrough/ { marked = 1; next }
     marked && /^```sh$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' README.md > walkthrough.sh
[[ -s walkthrough.sh ]] || fail "no walkthrough block after the README's marker"
say "the walkthrough ($(wc -l < walkthrough.sh) lines), log in $WORK/neardup/walkthrough.log"
if ! timeout 600 bash -euo pipefail walkthrough.sh > walkthrough.log 2>&1; then
  tail -n 60 walkthrough.log >&2
  bash ops/stack.sh down >/dev/null 2>&1 || true
  fail "the walkthrough did not run to its end"
fi

decided="$(python3 -c 'import json, sys; print(len({json.loads(l)["id"] for l in open(sys.argv[1]) if l.strip()}))' serve-decisions.jsonl)"
[[ "$decided" == "$samples" ]] || fail "serve decided $decided distinct records of $samples"
# The order across partitions moves a pair or two (README, "Scoring a serve run"): the run
# is to work, not to be scored to the last pair.
scores="$(grep -E '^ *(precision|recall): ' walkthrough.log | tr -s ' ' | tr '\n' ' ')"
python3 -c 'import re, sys; s = dict(re.findall(r"(\w+): ([\d.]+)", sys.argv[1])); sys.exit(not (len(s) == 2 and min(map(float, s.values())) >= 0.9))' "$scores" \
  || fail "eval of the serve run: ${scores:-no scores}"
grep -q "assigned" walkthrough.log || fail "serve logged no partition assignment"
grep -q "stopped: " walkthrough.log || fail "serve logged no last line"
say "ok: detect and two serve consumers decided all $samples records; eval --order input:$scores"
