#!/usr/bin/env bash
# Prepares deps/include (git-ignored) with the header-only dependencies the GPU machine lacks
# (toml++ and DLPack, copied from this machine's Debian packages), so `cmake --preset gpu` works
# there. Nothing here is committed: deps/ is carried to the device for a run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
rm -rf deps/include
mkdir -p deps/include
cp -r /usr/include/toml++ deps/include/
cp -r /usr/include/dlpack deps/include/
echo "deps/include ready: $(du -sh deps/include | cut -f1)"
