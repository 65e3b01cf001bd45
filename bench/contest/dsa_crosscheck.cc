// Cross-check of the two DSA packs on a GPU: for a set of cases (contest shapes and edge cases), the GPU reference
// and the naive baseline (CUDA, loaded with dlopen) against the CPU reference (also dlopen'ed), with the packs'
// own rules: the topk_indices checker for the indexer, atol = rtol = 1e-2 (ratio 1.0) on output and lse for the
// sparse attention. Also times the GPU solutions (CUDA events, 2 x L2 flush before each call, median of 20).
// Not part of the build: bench/contest/dsa_crosscheck.sh compiles and runs it on the GPU machine.
//
// Inputs: the packs' generators (src/contest) for structured inputs; q, weights and the attention caches are
// plain random (fp8: N(0,1) clamped to [-2,2]; others N(0,1) - an approximate normal, sum of 4 uniforms, for the
// 0.6 GB of cache; the distribution shape does not matter for a cross-check).
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <dlpack/dlpack.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fstream>

#include <nlohmann/json.hpp>

#include "contest/dsa_sparse_attention_gen.h"
#include "contest/generators.h"
#include "contest/dsa_topk_indexer_gen.h"
#include "contest/seeded_rng.h"
#include "contest/topk_indices_check.h"
#include "tensor/float_convert.h"
#include "tensor/safetensors.h"
#include "tensor/tensor.h"

using kda::tensor::DType;
using kda::tensor::Tensor;
using RunFn = int (*)(const DLTensor*, int64_t, DLTensor*, int64_t, void*);

namespace {

#define CUDA_OK(x)                                                                                  \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(3);                                                                                 \
    }                                                                                               \
  } while (0)

RunFn load(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "dlopen %s: %s\n", path.c_str(), dlerror());
    std::exit(3);
  }
  return reinterpret_cast<RunFn>(dlsym(h, "run"));
}

// Fast approximate N(0,1): sum of 4 uniforms, variance-corrected.
void fill_normal(Tensor& t, uint64_t seed, bool clamp2) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = 0;
    for (int k = 0; k < 4; ++k) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      u += (s >> 11) * 0x1.0p-53;
    }
    double v = (u - 2.0) * 1.7320508075688772;  // var of sum of 4 U(0,1) = 1/3
    if (clamp2) v = std::clamp(v, -2.0, 2.0);
    t.set_from_double(i, v);
  }
}

struct Dev {
  void* p = nullptr;
  size_t n = 0;
};

DLTensor device_view(const Tensor& host, Dev& d, bool upload) {
  d.n = static_cast<size_t>(host.nbytes());
  CUDA_OK(cudaMalloc(&d.p, std::max<size_t>(d.n, 16)));
  if (upload) CUDA_OK(cudaMemcpy(d.p, host.data(), d.n, cudaMemcpyHostToDevice));
  DLTensor v = host.dl_view();
  v.data = d.p;
  v.device = {kDLCUDA, 0};
  return v;
}

void* g_flush = nullptr;
size_t g_flush_bytes = 0;

// Median latency (ms) over 20 calls, each after a 2 x L2 flush.
double time_call(RunFn fn, const DLTensor* in, int64_t ni, DLTensor* out, int64_t no) {
  if (!g_flush) {
    int dev = 0, l2 = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    g_flush_bytes = 2 * static_cast<size_t>(l2);
    CUDA_OK(cudaMalloc(&g_flush, g_flush_bytes));
  }
  cudaEvent_t a, b;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn(in, ni, out, no, nullptr);
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    CUDA_OK(cudaMemsetAsync(g_flush, i, g_flush_bytes, nullptr));
    CUDA_OK(cudaEventRecord(a, nullptr));
    if (fn(in, ni, out, no, nullptr) != 0) return -1;
    CUDA_OK(cudaEventRecord(b, nullptr));
    CUDA_OK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int g_failures = 0;

void indexer_run(const std::string& dir, std::map<std::string, Tensor>& t, int64_t batch, int64_t max_pages,
                 int64_t pages, bool with_cpu, const std::string& label);

void indexer_case(const std::string& dir, int64_t batch, int64_t max_pages, std::vector<int32_t> lens, uint64_t seed) {
  const int64_t pages = 11923;
  std::map<std::string, Tensor> t;
  if (!kda::contest::generate_dsa_topk_indexer(
           {{"batch_size", batch}, {"max_num_pages", max_pages}, {"num_pages", pages}}, seed, seed + 7, t)
           .ok())
    std::exit(3);
  if (!lens.empty()) {  // edge lengths with their own full tables (pages 1 + b*M + s)
    for (int64_t b = 0; b < batch; ++b) {
      t.at("seq_lens").data_as<int32_t>()[b] = lens[b];
      for (int64_t s = 0; s < max_pages; ++s)
        t.at("block_table").data_as<int32_t>()[b * max_pages + s] = s * 64 < lens[b] ? 1 + b * max_pages + s : 0;
    }
  }
  Tensor q(DType::kFloat8E4M3FN, {batch, 64, 128}), w(DType::kFloat32, {batch, 64});
  fill_normal(q, seed + 1, true);
  fill_normal(w, seed + 2, false);
  t.insert_or_assign("q_index_fp8", std::move(q));
  t.insert_or_assign("weights", std::move(w));
  indexer_run(dir, t, batch, max_pages, pages, true, "case");
}

void indexer_run(const std::string& dir, std::map<std::string, Tensor>& t, int64_t batch, int64_t max_pages,
                 int64_t pages, bool with_cpu, const std::string& label) {
  static RunFn cpu = load(dir + "/idx_cpu.so"), ref = load(dir + "/idx_ref.so"), naive = load(dir + "/idx_naive.so");
  const Tensor& q = t.at("q_index_fp8");
  const Tensor& w = t.at("weights");
  const Tensor* hin[5] = {&q, &t.at("k_index_cache_fp8"), &w, &t.at("seq_lens"), &t.at("block_table")};
  Tensor out_cpu(DType::kInt32, {batch, 2048}), out_ref(DType::kInt32, {batch, 2048}),
      out_naive(DType::kInt32, {batch, 2048});
  DLTensor hv[5], dv[5];
  Dev dd[6];
  for (int i = 0; i < 5; ++i) hv[i] = hin[i]->dl_view(), dv[i] = device_view(*hin[i], dd[i], true);
  DLTensor hout = out_cpu.dl_view();
  auto t0 = std::chrono::steady_clock::now();
  const int rc_cpu = with_cpu ? cpu(hv, 5, &hout, 1, nullptr) : 0;
  const double cpu_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DLTensor dout = device_view(out_ref, dd[5], false);
  CUDA_OK(cudaMemset(dd[5].p, 0x7F, dd[5].n));  // poison (not -1: that would hide missing padding)
  const int rc_ref = ref(dv, 5, &dout, 1, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(out_ref.data(), dd[5].p, dd[5].n, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemset(dd[5].p, 0x7F, dd[5].n));
  const int rc_naive = naive(dv, 5, &dout, 1, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(out_naive.data(), dd[5].p, dd[5].n, cudaMemcpyDeviceToHost));
  kda::contest::TopkIndexerProblem p{batch,
                                     max_pages,
                                     pages,
                                     q.data_as<uint8_t>(),
                                     reinterpret_cast<const uint8_t*>(t.at("k_index_cache_fp8").data()),
                                     w.data_as<float>(),
                                     t.at("seq_lens").data_as<int32_t>(),
                                     t.at("block_table").data_as<int32_t>()};
  auto r1 = with_cpu ? kda::contest::check_topk_indices(p, out_ref.data_as<int32_t>(), out_cpu.data_as<int32_t>())
                     : kda::contest::TopkCheckResult{};
  auto r2 = kda::contest::check_topk_indices(p, out_naive.data_as<int32_t>(), out_ref.data_as<int32_t>());
  const double t_ref = with_cpu ? time_call(ref, dv, 5, &dout, 1) : 0.0, t_naive = time_call(naive, dv, 5, &dout, 1);
  int64_t long_rows = 0;
  for (int64_t b = 0; b < batch; ++b) long_rows += t.at("seq_lens").data_as<int32_t>()[b] > 2048;
  const bool ok = rc_cpu == 0 && rc_ref == 0 && rc_naive == 0 && r1.passed() && r2.passed();
  g_failures += ok ? 0 : 1;
  std::printf(
      "indexer %s B=%3ld M=%2ld long_rows=%2ld rc=%d/%d/%d gpu_ref_vs_cpu=%s(%s) naive_vs_gpu_ref=%s(%s) "
      "max_abs=%.3g ref_ms=%.4f naive_ms=%.4f cpu_s=%.2f %s\n",
      label.c_str(), (long)batch, (long)max_pages, (long)long_rows, rc_cpu, rc_ref, rc_naive,
      kda::contest::topk_verdict_name(r1.verdict), r1.message.c_str(), kda::contest::topk_verdict_name(r2.verdict),
      r2.message.c_str(), r2.max_absolute_error, t_ref, t_naive, cpu_s, ok ? "OK" : "FAIL");
  for (auto& d : dd) cudaFree(d.p);
}

// Contest rule: element fails iff |x-y| > atol and |x-y|/(|y|+1e-8) > rtol; inf/NaN in x fail (y = -inf matches
// x = -inf for lse of empty rows only in the reference comparisons here).
int64_t mismatches(const Tensor& x, const Tensor& y, double* max_abs) {
  int64_t bad = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double a = x.get_as_double(i), b = y.get_as_double(i);
    if (std::isinf(a) || std::isinf(b) || std::isnan(a) || std::isnan(b)) {
      bad += (a == b) ? 0 : 1;
      continue;
    }
    const double e = std::fabs(a - b);
    *max_abs = std::max(*max_abs, e);
    bad += (e > 1e-2 && e / (std::fabs(b) + 1e-8) > 1e-2) ? 1 : 0;
  }
  return bad;
}

void attention_run(const std::string& dir, int64_t tokens, const std::string& label, uint64_t seed,
                   std::vector<Tensor>& cache, const Tensor& idx, bool with_cpu);

void attention_case(const std::string& dir, int64_t tokens, const char* edge, uint64_t seed,
                    std::vector<Tensor>& cache) {
  const int64_t pages = 8462;
  std::map<std::string, Tensor> t;
  if (!kda::contest::generate_dsa_sparse_attention({{"num_tokens", tokens}, {"num_pages", pages}}, seed, 0, t).ok())
    std::exit(3);
  Tensor& idx = t.at("sparse_indices");
  if (std::string(edge) == "edge") {  // token 0: one valid index; token 1: empty; token 2: -1 interleaved + duplicates
    int32_t* v = idx.data_as<int32_t>();
    for (int64_t i = 0; i < 2048; ++i) {
      v[i] = i == 0 ? 77 : -1;
      v[2048 + i] = -1;
      if (tokens > 2) v[4096 + i] = i % 3 == 0 ? v[4096 + i] : (i % 3 == 1 ? v[4096 + i - 1] : -1);
    }
  }
  attention_run(dir, tokens, edge, seed, cache, idx, true);
}

void attention_run(const std::string& dir, int64_t tokens, const std::string& label, uint64_t seed,
                   std::vector<Tensor>& cache, const Tensor& idx, bool with_cpu) {
  static RunFn cpu = load(dir + "/attn_cpu.so"), ref = load(dir + "/attn_ref.so"), naive = load(dir + "/attn_naive.so");
  Tensor qn(DType::kBFloat16, {tokens, 16, 512}), qp(DType::kBFloat16, {tokens, 16, 64});
  fill_normal(qn, seed + 3, false);
  fill_normal(qp, seed + 4, false);
  Tensor scale(DType::kFloat32, {});
  scale.set_from_double(0, 0.1352337788608801);
  const Tensor* hin[6] = {&qn, &qp, &cache[0], &cache[1], &idx, &scale};
  Tensor o_cpu(DType::kBFloat16, {tokens, 16, 512}), l_cpu(DType::kFloat32, {tokens, 16});
  Tensor o_ref = o_cpu, l_ref = l_cpu, o_nv = o_cpu, l_nv = l_cpu;
  DLTensor hv[6], dv[6];
  Dev dd[8];
  for (int i = 0; i < 6; ++i) {
    hv[i] = hin[i]->dl_view();
    dv[i] = i == 5 ? hv[i] : device_view(*hin[i], dd[i], true);  // the scalar stays a host 0-d tensor
  }
  DLTensor hout[2] = {o_cpu.dl_view(), l_cpu.dl_view()};
  auto t0 = std::chrono::steady_clock::now();
  const int rc_cpu = with_cpu ? cpu(hv, 6, hout, 2, nullptr) : 0;
  const double cpu_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DLTensor dout[2] = {device_view(o_ref, dd[6], false), device_view(l_ref, dd[7], false)};
  auto run_gpu = [&](RunFn fn, Tensor& o, Tensor& l) {
    CUDA_OK(cudaMemset(dd[6].p, 0xFF, dd[6].n));  // NaN poison
    CUDA_OK(cudaMemset(dd[7].p, 0xFF, dd[7].n));
    const int rc = fn(dv, 6, dout, 2, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(o.data(), dd[6].p, dd[6].n, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(l.data(), dd[7].p, dd[7].n, cudaMemcpyDeviceToHost));
    return rc;
  };
  const int rc_ref = run_gpu(ref, o_ref, l_ref), rc_nv = run_gpu(naive, o_nv, l_nv);
  double a1 = 0, a2 = 0;
  const int64_t m1 = with_cpu ? mismatches(o_ref, o_cpu, &a1) + mismatches(l_ref, l_cpu, &a1) : 0;
  const int64_t m2 = mismatches(o_nv, o_ref, &a2) + mismatches(l_nv, l_ref, &a2);
  const double t_ref = time_call(ref, dv, 6, dout, 2), t_nv = time_call(naive, dv, 6, dout, 2);
  const bool ok = rc_cpu == 0 && rc_ref == 0 && rc_nv == 0 && m1 == 0 && m2 == 0;
  g_failures += ok ? 0 : 1;
  std::printf(
      "attention T=%2ld %-40s rc=%d/%d/%d gpu_ref_vs_cpu mismatches=%ld max_abs=%.3g naive_vs_gpu_ref "
      "mismatches=%ld max_abs=%.3g ref_ms=%.4f naive_ms=%.4f cpu_s=%.2f %s\n",
      (long)tokens, label.c_str(), rc_cpu, rc_ref, rc_nv, (long)m1, a1, (long)m2, a2, t_ref, t_nv, cpu_s,
      ok ? "OK" : "FAIL");
  for (int i = 0; i < 8; ++i)
    if (i != 2 && i != 3) cudaFree(dd[i].p);
  cudaFree(dd[2].p);  // caches are re-uploaded per case (simple, not fast)
  cudaFree(dd[3].p);
}

// Every workload line of a pack (main and holdout): the generator with the uuid's workload seed, blob inputs
// applied over it, plain random for the rest; GPU reference vs naive baseline (no CPU reference: too slow for
// 150 workloads on one core).
void sweep(const std::string& dir, const std::string& tasks, std::vector<Tensor>& cache) {
  for (const char* name :
       {"dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"}) {
    const std::string pack = tasks + "/" + name;
    const bool indexer = std::string(name).find("indexer") != std::string::npos;
    for (const char* file : {"workloads.jsonl", "holdout.jsonl"}) {
      std::ifstream in(pack + "/" + file);
      std::string line;
      while (std::getline(in, line)) {
        const auto w = nlohmann::json::parse(line)["workload"];
        const std::string uuid = w["uuid"];
        std::map<std::string, int64_t> axes;
        for (auto& [k, v] : w["axes"].items()) axes[k] = v.get<int64_t>();
        const uint64_t seed = kda::contest::workload_seed_from_uuid(uuid);
        std::map<std::string, Tensor> t;
        const auto* gen = kda::contest::find_generator(indexer ? "dsa_topk_indexer" : "dsa_sparse_attention");
        if (!(*gen)(axes, seed, seed ^ 0x5bd1e995u, t).ok()) std::exit(3);
        for (auto& [k, v] : w["inputs"].items()) {
          if (v["type"] != "safetensors") continue;
          auto blob = kda::tensor::read_safetensors_tensor(pack + "/" + v["path"].get<std::string>(), v["tensor_key"]);
          if (!blob.ok()) {
            std::fprintf(stderr, "%s\n", blob.status().message().c_str());
            std::exit(3);
          }
          t.insert_or_assign(k, std::move(blob).value());
        }
        const std::string label = std::string(file == std::string("holdout.jsonl") ? "holdout " : "main ") + uuid;
        if (indexer) {
          const int64_t batch = axes.at("batch_size");
          Tensor q(DType::kFloat8E4M3FN, {batch, 64, 128}), wt(DType::kFloat32, {batch, 64});
          fill_normal(q, seed + 1, true);
          fill_normal(wt, seed + 2, false);
          t.insert_or_assign("q_index_fp8", std::move(q));
          t.insert_or_assign("weights", std::move(wt));
          indexer_run(dir, t, batch, axes.at("max_num_pages"), axes.at("num_pages"), false, label);
        } else {
          attention_run(dir, axes.at("num_tokens"), label, seed, cache, t.at("sparse_indices"), false);
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  const std::string which = argc > 2 ? argv[2] : "all";
  if (which == "all" || which == "indexer") {
    indexer_case(dir, 4, 33, {0, 1, 2048, 2049}, 1);
    indexer_case(dir, 1, 1, {}, 2);
    indexer_case(dir, 8, 64, {}, 3);
    indexer_case(dir, 15, 20, {}, 4);
    indexer_case(dir, 30, 77, {}, 5);
    indexer_case(dir, 31, 91, std::vector<int32_t>(31, 91 * 64), 6);
  }
  std::vector<Tensor> cache;
  if (which != "indexer") {
    cache.emplace_back(DType::kBFloat16, std::vector<int64_t>{8462, 64, 512});
    cache.emplace_back(DType::kBFloat16, std::vector<int64_t>{8462, 64, 64});
    fill_normal(cache[0], 101, false);
    fill_normal(cache[1], 102, false);
  }
  if (which == "all" || which == "attention") {
    attention_case(dir, 3, "edge", 10, cache);
    for (int64_t t : {1, 2, 6, 8, 16}) attention_case(dir, t, "main", 20 + t, cache);
  }
  if (which == "sweep") sweep(dir, argc > 3 ? argv[3] : "tasks/contest", cache);
  std::printf("failures: %d\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
