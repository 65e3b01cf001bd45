#!/usr/bin/env bash
# Installs the agent CLIs kda drives (pinned versions) from the npm registry into a cache dir,
# skipping what is already there, and prints the binaries' paths (KEY=path lines).
#
#   scripts/install-agent-clis.sh [--dir DIR]     (default: $KDA_AGENT_CLIS_DIR or
#                                                  ${XDG_CACHE_HOME:-~/.cache}/kda/agent-clis)
# Tests find the CLIs in the same dir (or through KDA_CLAUDE_BIN / KDA_CODEX_BIN).
set -euo pipefail
claude_version=2.1.332
codex_version=0.171.0
dir="${KDA_AGENT_CLIS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kda/agent-clis}"
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    -h|--help) sed -n 2,7p "$0"; exit 0 ;;
    *) echo "install-agent-clis: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v npm >/dev/null || { echo "install-agent-clis: npm not found (apt-get install npm)" >&2; exit 2; }

# install <subdir> <package@version> <path of the binary inside the prefix>
install_one() {
  local prefix="$dir/$1" spec="$2" bin="$3"
  if [ -x "$prefix/$bin" ] && [ -f "$prefix/.kda-installed" ] && [ "$(cat "$prefix/.kda-installed")" = "$spec" ]; then
    echo "install-agent-clis: $spec already in $prefix" >&2
  else
    echo "install-agent-clis: installing $spec into $prefix" >&2
    rm -rf "$prefix"
    mkdir -p "$prefix"
    # --ignore-scripts: Claude's postinstall only links its native binary (found below without it)
    # and wants a newer node than Debian 12 ships.
    npm install --prefix "$prefix" --ignore-scripts --no-audit --no-fund --loglevel=error "$spec" >&2
    echo "$spec" > "$prefix/.kda-installed"
  fi
}
install_one claude "@anthropic-ai/claude-code@$claude_version" node_modules/.bin/claude
install_one codex "@openai/codex@$codex_version" node_modules/.bin/codex

# Claude's entry point is a stub until its postinstall links the native binary; prefer the
# platform package's binary when present so an --ignore-scripts install still works.
claude_bin="$dir/claude/node_modules/.bin/claude"
for cand in "$dir"/claude/node_modules/@anthropic-ai/claude-code-linux-*/claude; do
  [ -x "$cand" ] && claude_bin="$cand" && break
done
codex_bin="$dir/codex/node_modules/.bin/codex"
echo "KDA_CLAUDE_BIN=$claude_bin"
echo "KDA_CODEX_BIN=$codex_bin"
