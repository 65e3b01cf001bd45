#!/usr/bin/env bash
# FlashInfer-Bench's "Minimal Runnable Example" of its server API (docs/tutorials/server-api.mdx in
# flashinfer-ai/flashinfer-bench), its steps as that page gives them (curl and jq), against the real
# `kda serve` on the host packs: the first definition with a workload, a Python solution with a syntax
# error, POST /evaluate, a long-poll of GET /tasks/{id}. Expected, as there: status completed and
# traces[0].evaluation.status COMPILE_ERROR. Then SIGTERM (what scancel sends) must stop the server
# with exit 0. Usage: fib_minimal_example.sh KDA SOURCE_DIR
set -euo pipefail
KDA=$1
SRC=$2
for tool in curl jq; do
  command -v "$tool" > /dev/null || { echo "FAIL: $tool is needed (scripts/install-deps.sh installs it)"; exit 1; }
done
if ! "$KDA" serve --help > /dev/null 2>&1; then
  echo "FAIL: this kda has no 'serve' command: it was built without cpp-httplib (libcpp-httplib-dev)"
  exit 1
fi
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
"$KDA" serve --local "$SRC/tasks/host" --port 0 --devices cpu:2 --address-file "$tmp/address.json" \
  --warmup-runs 1 --iterations 5 --num-trials 1 --work-dir "$tmp/work" 2> "$tmp/serve.log" &
pid=$!
for _ in $(seq 200); do
  [ -s "$tmp/address.json" ] && break
  sleep 0.05
done
[ -s "$tmp/address.json" ] || { echo "FAIL: kda serve wrote no address file"; cat "$tmp/serve.log"; exit 1; }

BASE_URL=$(jq -r .url "$tmp/address.json")

# Pick the first definition that has at least one workload.
DEFINITION=$(
  curl -s "$BASE_URL/definitions" | jq -r '.[].name' | while read -r name; do
    count=$(curl -s "$BASE_URL/definitions/$name/workloads" | jq 'length')
    if [ "$count" -gt 0 ]; then
      echo "$name"
      break
    fi
  done
)
WORKLOAD_UUID=$(curl -s "$BASE_URL/definitions/$DEFINITION/workloads" | jq -r '.[0].uuid')

jq -n --arg definition "$DEFINITION" --arg workload_uuid "$WORKLOAD_UUID" '{
    solution: {
      name: "docs_compile_error",
      definition: $definition,
      author: "docs",
      spec: {
        language: "python",
        target_hardware: ["cuda"],
        entry_point: "pkg/main.py::kernel",
        destination_passing_style: false
      },
      sources: [{path: "pkg/main.py", content: "def kernel(\n    return 0\n"}]
    },
    workload_uuids: [$workload_uuid]
  }' > "$tmp/request.json"

TASK_ID=$(curl -s -X POST "$BASE_URL/evaluate" -H "Content-Type: application/json" -d @"$tmp/request.json" |
  jq -r '.task_id')
curl -s "$BASE_URL/tasks/$TASK_ID?timeout=60" > "$tmp/task.json"

status=$(jq -r .status "$tmp/task.json")
verdict=$(jq -r '.traces[0].evaluation.status' "$tmp/task.json")
if [ "$status" != completed ] || [ "$verdict" != COMPILE_ERROR ]; then
  echo "FAIL: expected completed / COMPILE_ERROR, got $status / $verdict"
  cat "$tmp/task.json" "$tmp/serve.log"
  exit 1
fi
echo "ok: $DEFINITION $WORKLOAD_UUID -> $status / $verdict"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] || { echo "FAIL: kda serve exited $rc after SIGTERM"; cat "$tmp/serve.log"; exit 1; }
grep -q "task $TASK_ID completed" "$tmp/serve.log" || { echo "FAIL: no progress line for the task"; cat "$tmp/serve.log"; exit 1; }
echo "ok: SIGTERM stopped kda serve (exit 0)"
