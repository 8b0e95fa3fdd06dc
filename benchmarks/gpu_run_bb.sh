#!/usr/bin/env bash
# GPU run BB: cross-entropy's forward with the one-hot pick and the log-softmax sum taken from
# x - max (graph_passes.one_hot_picks, log_softmax_sums): their tests and the cross-entropy
# tests on the GPU, the forward with and without them (benchmarks/sweep_picks.py), and the
# cross-entropy rows of the norm table against eager and Inductor.
source "$(dirname "$0")/gpu_lib.sh"
timeout 150 python3 -m pytest -q -n 15 -p no:cacheprovider -rfE tests/test_graph_passes.py tests/test_semantics.py \
  -k "graph_passes or cross_entropy or nll or log_softmax" > "$out/tests-full.log" 2>&1
grep -E "passed|failed|FAILED|ERROR" "$out/tests-full.log" | tail -30 > "$out/tests.log"
timeout 200 python3 benchmarks/sweep_picks.py --json "$out/sweep_picks.json" > "$out/sweep_picks.log" 2>&1
gpu_norms 200 170 cross_entropy
gpu_pack norms
