#!/usr/bin/env bash
# Installs kda's build and test dependencies from Debian 12 packages.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libfmt-dev libtomlplusplus-dev libdlpack-dev
  libssl-dev libsqlite3-dev libcurl4-openssl-dev libseccomp-dev
  libgtest-dev libgmock-dev libbenchmark-dev jq clang-format
  libpython3-dev python3-numpy python3-venv libcpp-httplib-dev curl
)
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
