#!/usr/bin/env bash
# GPU run A: tests on CUDA, smoke benchmark (with and without the rows-loop variant),
# micro suite (forward+backward, bf16). Results under $OUT.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
TESTS="tests/test_frontend.py tests/test_ops.py tests/test_reductions.py tests/test_random.py tests/test_cudagraphs.py tests/test_schedulers.py tests/test_layouts.py tests/test_semantics.py tests/test_models.py"
timeout 210 python3 -m pytest -q -n 12 -p no:cacheprovider --maxfail=40 $TESTS 2>&1 | tail -40 > $out/tests.log; tail -15 $out/tests.log
timeout 70 python3 benchmarks/smoke.py --iters 10 --json $out/smoke.json 2>&1 | tail -8
timeout 70 python3 benchmarks/smoke.py --iters 10 --rows-loop --json $out/smoke_rows.json 2>&1 | tail -7
timeout 200 python3 -m torchfuse.bench --suite micro --mode train-amp-bf16 --backends eager,torch.compile,torchfuse --time-budget 170 --out /tmp/bench --no-progress 2>&1 | tail -30
tar czf $out/bench_micro.tgz -C /tmp bench
