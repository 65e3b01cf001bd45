#!/bin/sh
# scripts/check-contest-workloads.py must fail on each kind of difference between the contest packs' workloads and
# the project's copy of the contest axes (tasks/contest_axes/): each planted in a copy of tasks/. Usage:
# contest_workloads_test.sh <project root>
set -u
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/scripts" "$tmp/tasks/contest"
cp "$root/scripts/check-contest-workloads.py" "$tmp/scripts/"
cp -r "$root/tasks/contest_axes" "$tmp/tasks/"
for p in "$root"/tasks/contest/*/; do
  n=$(basename "$p")
  mkdir -p "$tmp/tasks/contest/$n"
  cp "$p/definition.json" "$p/task.toml" "$p/workloads.jsonl" "$p/holdout.jsonl" "$tmp/tasks/contest/$n/"
done
fail() { echo "contest_workloads_test: $*"; exit 1; }
check() { python3 "$tmp/scripts/check-contest-workloads.py" "$tmp" > "$tmp/out" 2>&1; }
# expect_refused FILE MESSAGE: the check exits 1 and prints MESSAGE; then FILE is restored from the project.
expect_refused() {
  check
  [ $? -eq 1 ] || fail "not refused: $2"
  grep -q -- "$2" "$tmp/out" || fail "the message does not say '$2': $(cat "$tmp/out")"
  rel=${1#"$tmp"/}
  cp "$root/$rel" "$1"
}

check || fail "the unchanged copy does not pass: $(cat "$tmp/out")"

dec=$tmp/tasks/contest/gdn_decode_qk4_v8_d128_k_last
pre=$tmp/tasks/contest/gdn_prefill_qk4_v8_d128_k_last
moe=$tmp/tasks/contest/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048
idx=$tmp/tasks/contest/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64
att=$tmp/tasks/contest/dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64
axes=$tmp/tasks/contest_axes

# An axis value: the first prefill workload's num_seqs (and len_cu_seqlens with it).
sed -i '1s/"num_seqs": 1, "len_cu_seqlens": 2/"num_seqs": 2, "len_cu_seqlens": 3/' "$pre/workloads.jsonl"
expect_refused "$pre/workloads.jsonl" "num_seqs = 2, the contest's is 1"
# A scalar input: an MoE offset.
sed -i '1s/"local_expert_offset": {"type": "scalar", "value": 192}/"local_expert_offset": {"type": "scalar", "value": 64}/' \
  "$moe/workloads.jsonl"
expect_refused "$moe/workloads.jsonl" "local_expert_offset = 64, the contest's is 192"
# A missing workload (the last line dropped) and an extra one (a uuid changed).
sed -i '$d' "$dec/workloads.jsonl"
expect_refused "$dec/workloads.jsonl" "is missing"
sed -i '1s/"uuid": "\([0-9a-f]*\)/"uuid": "0000\1/' "$att/workloads.jsonl"
expect_refused "$att/workloads.jsonl" "is not the contest's"
# A derived axis and a constant scalar.
sed -i '2s/"len_cu_seqlens": \([0-9]*\)/"len_cu_seqlens": 1\1/' "$pre/workloads.jsonl"
expect_refused "$pre/workloads.jsonl" "axis len_cu_seqlens"
sed -i '1s/"sm_scale": {"type": "scalar", "value": [0-9.]*}/"sm_scale": {"type": "scalar", "value": 0.125}/' \
  "$att/workloads.jsonl"
expect_refused "$att/workloads.jsonl" "scalar sm_scale = 0.125"
# The TSV copy: a value changed (its sha256 no longer the README's), a row dropped (the count too).
sed -i '2s/\t\([0-9]*\)\t11923$/\t9\1\t11923/' "$axes/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64.tsv"
expect_refused "$axes/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64.tsv" "sha256"
sed -i '$d' "$axes/gdn_decode_qk4_v8_d128_k_last.tsv"
expect_refused "$axes/gdn_decode_qk4_v8_d128_k_last.tsv" "53 data rows, README says 54"
# A holdout that reuses a workload's uuid; a dev workload that is not a workload.
u=$(head -1 "$idx/workloads.jsonl" | sed 's/.*"uuid": "\([^"]*\)".*/\1/')
sed -i "1s/\"uuid\": \"[^\"]*\"/\"uuid\": \"$u\"/" "$idx/holdout.jsonl"
expect_refused "$idx/holdout.jsonl" "is also a workload's"
sed -i 's/^dev_workloads = \["/dev_workloads = ["x/' "$dec/task.toml"
expect_refused "$dec/task.toml" "is not in workloads.jsonl"

check || fail "the restored copy does not pass: $(cat "$tmp/out")"
echo "contest_workloads_test: every planted difference refused"
