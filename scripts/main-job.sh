#!/usr/bin/env bash
# kda's main job on its embedded default: the official evaluator on a built-in pack's baseline —
# the CUDA RMSNorm pack where a GPU is present, the host RMSNorm pack otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
pack=tasks/host/rmsnorm
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && [ -x build/kda-runner ]; then
  pack=tasks/cuda/rmsnorm
fi
build/kda task validate "$pack"
exec build/kda eval "$pack/baselines/naive" --task "$pack" --workloads dev
