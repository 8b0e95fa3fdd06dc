#!/usr/bin/env bash
# GPU run BS: conformance shards 25-36 of 48 on an H200, 12 side by side (batch 3 of 4;
# runs BQ to BT together cover PyTorch's OpInfo database: merged into
# results/conformance-h200/ with `torchfuse conformance --merge`).
source "$(dirname "$0")/gpu_lib.sh"
gpu_conformance 530 420 25 36 48
gpu_pack conformance
