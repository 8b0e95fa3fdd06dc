# Steps shared by the GPU run scripts (benchmarks/gpu_run_*.sh), sourced by them: each run
# writes its logs under $OUT (default /tmp/out), and packs result folders into results.tgz.
# Every step is cut off by `timeout LIMIT`; BUDGET is the seconds the benchmark itself plans
# for (its --time-budget), a little under LIMIT.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
mkdir -p "$out"

# gpu_suite LIMIT: the whole test suite on 15 workers; its summary lines in tests.log.
gpu_suite() {
  timeout "$1" python3 -m pytest -q -n 15 -p no:cacheprovider -rfE --maxfail=40 tests > "$out/tests-full.log" 2>&1
  grep -E "passed|failed|FAILED|ERROR|xpassed" "$out/tests-full.log" | tail -45 > "$out/tests.log"
}

# gpu_norms LIMIT BUDGET OPS [DTYPES]: rows of benchmarks/norms.py with per-kernel times, in norms/.
gpu_norms() {
  timeout "$1" python3 benchmarks/norms.py --ops "$3" --dtypes "${4:-bfloat16,float32}" \
    --per-kernel --time-budget "$2" --out "$out/norms" > "$out/norms.log" 2>&1
}

# gpu_sweep_rows LIMIT BUDGET NAME [ARGS...]: benchmarks/sweep_rows.py, in NAME.json and NAME.log.
gpu_sweep_rows() {
  local limit=$1 budget=$2 name=$3
  shift 3
  timeout "$limit" python3 benchmarks/sweep_rows.py "$@" --time-budget "$budget" --json "$out/$name.json" \
    > "$out/$name.log" 2>&1
}

# gpu_train_hf LIMIT BUDGET: HuggingFace training (BERT-base, GPT-2; AMP bf16) against eager and
# torch.compile, in train-hf/ and train.log.
gpu_train_hf() {
  timeout "$1" python3 -m torchfuse.bench --suite hf --mode train-amp-bf16 --only 'hf/bert/64x128,hf/gpt2/8x512' \
    --backends eager,torch.compile,torchfuse --time-budget "$2" --out "$out/train-hf" --no-progress 2>&1 \
    | grep -v Warn | tail -8 > "$out/train.log"
}

# gpu_pack DIR...: the result folders that exist, packed into results.tgz and removed.
gpu_pack() {
  local dirs
  dirs=$(cd "$out" && ls -d "$@" 2>/dev/null)
  [ -n "$dirs" ] && tar czf "$out/results.tgz" -C "$out" $dirs
  for d in "$@"; do rm -rf "${out:?}/$d"; done
}

# gpu_conformance LIMIT BUDGET FIRST LAST N: conformance shards FIRST..LAST of N side by side on
# one GPU (compiled kernels, CUDA eager as the reference; compiling is CPU work, one process a
# core), one sample per (op, dtype), no op started after BUDGET seconds; tables in
# conformance/sI/ (torchfuse conformance --merge combines them).
gpu_conformance() {
  local limit=$1 budget=$2 first=$3 last=$4 n=$5 i
  for i in $(seq "$first" "$last"); do
    timeout "$limit" python3 -m torchfuse.cli conformance --device cuda --shard "$i/$n" --max-samples 1 \
      --sample-timeout 60 --time-budget "$budget" --quiet --out "$out/conformance/s$i" \
      > "$out/conformance-s$i.log" 2>&1 &
  done
  wait
  tail -qn 2 "$out"/conformance-s*.log > "$out/conformance.log"
}
