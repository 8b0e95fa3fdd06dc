#!/usr/bin/env bash
# GPU run B: test suite on CUDA, then HuggingFace and TIMM training (AMP bf16).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
timeout 60 python3 -m pytest -q -x -p no:cacheprovider "tests/test_ops.py::test_op_forward" 2>&1 | grep -v "^  " | tail -30 > $out/first_failure.log
TESTS="tests/test_frontend.py tests/test_ops.py tests/test_reductions.py tests/test_random.py tests/test_cudagraphs.py tests/test_schedulers.py tests/test_layouts.py tests/test_semantics.py tests/test_models.py tests/test_fusion_api.py tests/test_registry.py"
timeout 170 python3 -m pytest -q -n 12 -p no:cacheprovider --maxfail=60 $TESTS 2>&1 | tail -70 > $out/tests.log; tail -8 $out/tests.log
timeout 300 python3 -m torchfuse.bench --suite hf,timm --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512,timm/resnet50*' --backends eager,torch.compile,torchfuse --time-budget 250 --out /tmp/bench --no-progress 2>&1 | grep -v Warning | tail -25
tar czf $out/bench_train.tgz -C /tmp bench
