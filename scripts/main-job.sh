#!/usr/bin/env bash
# kda's main job on its embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
build/kda --help
