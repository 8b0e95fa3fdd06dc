#!/usr/bin/env bash
# GPU run BC: run BB found the cross-entropy forward rewrites slower on rows of 3072 to 8192;
# the same sweep with sibling row sums reduced together and apart, with register counts.
source "$(dirname "$0")/gpu_lib.sh"
timeout 300 python3 benchmarks/sweep_picks.py --batch both --json "$out/sweep_picks.json" > "$out/sweep_picks.log" 2>&1
