#!/usr/bin/env bash
# Builds kda and kda-runner here the way the GPU machine will (bench/gpu/build.sh): without the optional
# packages it lacks (SQLite, libcurl, and everything found through pkg-config: libseccomp, cpp-httplib), so
# that a build error the device would hit costs minutes of this machine instead of device time. A source
# that compiled here only through a header of an optional feature (run_loop.cc used util::join with
# util/strings.h reaching it that way) fails here as it would there.
# Usage: scripts/gpu-preflight.sh [BUILD_DIR]   (default build-nodeps/, git-ignored through .git/info/exclude)
# Exit status: the build's. A fresh build takes about 8 minutes on 2 cores; later ones only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-nodeps}
if [ ! -f "$dir/build.ninja" ]; then
  PKG_CONFIG_LIBDIR=/nonexistent cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON \
    -DKDA_BUILD_BENCH=OFF -DKDA_BUILD_TESTS=OFF > "$dir.configure.log" 2>&1 ||
    { tail -20 "$dir.configure.log"; exit 1; }
  grep "kda: CUDA backend" "$dir.configure.log" || true
fi
ninja -C "$dir" -j "$(nproc)" kda kda-runner
