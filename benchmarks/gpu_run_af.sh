#!/usr/bin/env bash
# GPU run AF: run AA's inference benchmark again (fp16, CUDA graphs, batch 1 and 8, both
# layouts; ResNet-50 and MobileNetV3-Large against eager, eager + CUDA graphs and Inductor's
# reduce-overhead mode), after the latency-bound launch configurations of runs AC-AE, on a host
# that was not slow.
exec bash "$(dirname "$0")/gpu_run_aa.sh"
