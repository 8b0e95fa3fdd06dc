#!/usr/bin/env bash
# GPU run BQ: conformance shards 1-12 of 48 on an H200, 12 side by side (batch 1 of 4;
# runs BQ to BT together cover PyTorch's OpInfo database: merged into
# results/conformance-h200/ with `torchfuse conformance --merge`).
source "$(dirname "$0")/gpu_lib.sh"
gpu_conformance 530 420 1 12 48
gpu_pack conformance
