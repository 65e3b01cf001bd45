# kda serve on one GPU against kda eval (bench/results/h100/serve_2026-12-05.md). Carry deps/ with
# head-src.tgz (git archive of HEAD), include/, httplib/ (Debian 12 cpp-httplib header, library and
# brotli headers and libraries, a cpp-httplib.pc pointing at /tmp/k/deps/httplib) and warp_rows.json
# (kda solution export of solutions/gdn_decode_qk4_v8_d128_k_last/warp_rows); run: bash bench/gpu/serve_h100.sh
set -u; mkdir -p $OUT /tmp/k; tar xzf deps/head-src.tgz -C /tmp/k; cp deps/warp_rows.json /tmp/k/; mkdir -p /tmp/k/deps; cp -r deps/include deps/httplib /tmp/k/deps/; cd /tmp/k
export PKG_CONFIG_PATH=/tmp/k/deps/httplib/lib/pkgconfig LD_LIBRARY_PATH=/tmp/k/deps/httplib/lib
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $OUT/gpu.txt
t0=$(date +%s); source bench/gpu/build.sh; grep "cpp-httplib" $OUT/configure.log
D=tasks/contest/gdn_decode_qk4_v8_d128_k_last
s=$(date +%s%N); build-gpu/kda eval warp_rows.json --task $D --workloads all --json > $OUT/direct_all.json 2>/dev/null; echo "direct_all rc=$? $(( ($(date +%s%N)-s)/1000000 ))ms"
U=$(python3 -c "import json;print(json.loads(open('$D/workloads.jsonl').readline())['workload']['uuid'])")
for i in 0 1 2; do s=$(date +%s%N); build-gpu/kda eval warp_rows.json --task $D --workloads $U --json > /dev/null 2>&1; echo "direct_one_$i rc=$? $(( ($(date +%s%N)-s)/1000000 ))ms"; done
build-gpu/kda serve --local $D --devices cuda:0 --port 0 --address-file /tmp/addr.json 2> $OUT/serve.log & P=$!
for i in $(seq 100); do [ -s /tmp/addr.json ] && break; sleep 0.1; done
python3 bench/gpu/serve_client.py /tmp/addr.json warp_rows.json $OUT/serve_tasks.json
kill -TERM $P; wait $P; echo "serve exit $?"; tail -3 $OUT/serve.log
echo total $(( $(date +%s)-t0 ))s
