#!/usr/bin/env bash
# GPU run Y: the whole test suite after the launch path's pointer list is built once, Options()
# takes its environment defaults and explain files buffer writes as state updates. (The device
# time left allowed the tests only.)
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"
timeout 195 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -30 > "$out/tests.log"
