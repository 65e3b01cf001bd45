#!/usr/bin/env bash
# Builds kda and kda-runner here the way the GPU machine will (bench/gpu/build.sh, the gpu preset): file by file,
# without the optional packages it lacks (SQLite, libcurl, and everything found through pkg-config: libseccomp,
# cpp-httplib), so that a build error the device would hit costs minutes of this machine instead of device time.
# Usage: scripts/gpu-preflight.sh [BUILD_DIR]   (default build-nodeps/, git-ignored through .git/info/exclude)
# KDA_PREFLIGHT_JOBS sets ninja's jobs (default: every core). Exit status: the build's. A fresh build takes about
# 8 minutes on 2 cores; later ones only what changed. Not a CI test: on one core beside the others it would add
# about 9 minutes to CI's 16 (its 20-minute target). Why a file can build here and not there: the default preset
# (and CI) is a unity build, which compiles a module's files in batches, so a file can lean on an include of an
# earlier file of its batch (run_loop.cc on util/strings.h); the gpu preset, like this script, compiles file by file.
# Checked once by hand: with that include removed this fails as the device did ("'util' has not been declared"),
# and passes with it.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-nodeps}
if [ ! -f "$dir/build.ninja" ]; then
  PKG_CONFIG_LIBDIR=/nonexistent cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_UNITY_BUILD=OFF -DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON \
    -DKDA_BUILD_BENCH=OFF -DKDA_BUILD_TESTS=OFF > "$dir.configure.log" 2>&1 ||
    { tail -20 "$dir.configure.log"; exit 1; }
  grep "kda: CUDA backend" "$dir.configure.log" || true
fi
ninja -C "$dir" -j "${KDA_PREFLIGHT_JOBS:-$(nproc)}" kda kda-runner
