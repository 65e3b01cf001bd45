#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install dependencies, build, run kda's main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
scripts/main-job.sh
