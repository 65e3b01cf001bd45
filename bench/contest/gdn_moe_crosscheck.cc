// Cross-check of the GDN decode, GDN prefill and MoE packs on a GPU: the GPU reference and the naive baseline
// (CUDA, loaded with dlopen through the kda ABI) against the CPU reference (also dlopen'ed) on contest shapes and
// edge cases, with each pack's rule (contest element rule |x-y| > atol and |x-y|/(|y|+1e-8) > rtol fails;
// inf/NaN in a candidate fail; the workload fails when the matched fraction is below the ratio). Also times the
// GPU solutions (CUDA events, 2 x L2 flush before each call, median). Not part of the build:
// bench/contest/gdn_moe_crosscheck.sh compiles and runs it on the GPU machine.
//
// Modes: all (cases vs the CPU reference), sweep (every workload of the three packs, main and holdout, inputs
// from the pack generators with the workload seed of the uuid: naive baseline vs GPU reference, timings).
// MoE hidden states and weights are random (fp8 of an approximate N(0,1) clamped to [-2,2]; scales N(0,1), signs
// included, as the contest); the routing inputs come from the pack's generator.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <dlpack/dlpack.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contest/gdn_gen.h"
#include "contest/generators.h"
#include "contest/moe_gen.h"
#include "tensor/float_convert.h"
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

const char* kDecode = "gdn_decode_qk4_v8_d128_k_last";
const char* kPrefill = "gdn_prefill_qk4_v8_d128_k_last";
const char* kMoe = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048";

RunFn load(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "dlopen %s: %s\n", path.c_str(), dlerror());
    std::exit(3);
  }
  return reinterpret_cast<RunFn>(dlsym(h, "run"));
}

struct Solutions {
  RunFn cpu, ref, naive;
};

// ---- device buffers and timing

struct Dev {
  void* p = nullptr;
  size_t n = 0;
  ~Dev() { cudaFree(p); }
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

// Median latency (ms) over `iters` calls, each after a 2 x L2 flush (memset), after 2 untimed calls.
double time_call(RunFn fn, const DLTensor* in, int64_t ni, DLTensor* out, int64_t no, int iters = 20) {
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
  for (int i = 0; i < 2; ++i) fn(in, ni, out, no, nullptr);
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    CUDA_OK(cudaMemsetAsync(g_flush, i, g_flush_bytes, nullptr));
    CUDA_OK(cudaEventRecord(a, nullptr));
    if (fn(in, ni, out, no, nullptr) != 0) return -1;
    CUDA_OK(cudaEventRecord(b, nullptr));
    CUDA_OK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// ---- comparison (contest rule)

struct Cmp {
  int64_t fails = 0, numel = 0, nonfinite = 0;
  double max_abs = 0.0, max_rel = 0.0;
  double matched() const { return numel ? 1.0 - static_cast<double>(fails) / numel : 1.0; }
};

Cmp compare(const Tensor& x, const Tensor& y, double atol, double rtol) {
  Cmp c;
  c.numel = x.numel();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double a = x.get_as_double(i), b = y.get_as_double(i);
    if (!std::isfinite(a)) {
      ++c.nonfinite;
      ++c.fails;
      continue;
    }
    const double e = std::abs(a - b), r = e / (std::abs(b) + 1e-8);
    c.max_abs = std::max(c.max_abs, e);
    c.max_rel = std::max(c.max_rel, r);
    if (e > atol && r > rtol) ++c.fails;
  }
  return c;
}

int g_failures = 0;

// Runs one solution on device copies of `inputs` (scalars stay host 0-d tensors), outputs poisoned with NaN bytes.
// Returns the rc; outputs are downloaded into `outs`. If time_iters > 0 also returns the median time in *ms.
int run_gpu(RunFn fn, const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outs, int time_iters, double* ms) {
  std::vector<Dev> din(inputs.size()), dout(outs.size());
  std::vector<DLTensor> vin, vout;
  for (size_t i = 0; i < inputs.size(); ++i)
    vin.push_back(inputs[i]->ndim() == 0 ? inputs[i]->dl_view() : device_view(*inputs[i], din[i], true));
  for (size_t i = 0; i < outs.size(); ++i) {
    vout.push_back(device_view(outs[i], dout[i], false));
    CUDA_OK(cudaMemset(dout[i].p, 0xFF, dout[i].n));  // NaN poison for bf16 and f32
  }
  const int rc =
      fn(vin.data(), static_cast<int64_t>(vin.size()), vout.data(), static_cast<int64_t>(vout.size()), nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  for (size_t i = 0; i < outs.size(); ++i)
    CUDA_OK(cudaMemcpy(outs[i].data(), dout[i].p, dout[i].n, cudaMemcpyDeviceToHost));
  if (ms)
    *ms =
        (rc == 0 && time_iters > 0) ? time_call(fn, vin.data(), vin.size(), vout.data(), vout.size(), time_iters) : 0.0;
  return rc;
}

int run_cpu(RunFn fn, const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outs, double* seconds) {
  std::vector<DLTensor> vin, vout;
  for (const Tensor* t : inputs) vin.push_back(t->dl_view());
  for (Tensor& t : outs) vout.push_back(t.dl_view());
  const auto t0 = std::chrono::steady_clock::now();
  const int rc =
      fn(vin.data(), static_cast<int64_t>(vin.size()), vout.data(), static_cast<int64_t>(vout.size()), nullptr);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rc;
}

std::vector<Tensor> fresh(const std::vector<Tensor>& like) {
  std::vector<Tensor> v;
  for (const Tensor& t : like) v.emplace_back(t.dtype(), t.shape());
  return v;
}

// Checks ref (vs cpu when given) and naive (vs ref) on every output; prints one line.
void check_case(const std::string& label, const Solutions& s, const std::vector<const Tensor*>& inputs,
                const std::vector<Tensor>& out_like, const std::vector<std::string>& out_names, double atol,
                double rtol, double ratio, bool with_cpu, int ref_iters, int naive_iters) {
  std::vector<Tensor> o_cpu = fresh(out_like), o_ref = fresh(out_like), o_naive = fresh(out_like);
  double cpu_s = 0.0, ref_ms = 0.0, naive_ms = 0.0;
  const int rc_cpu = with_cpu ? run_cpu(s.cpu, inputs, o_cpu, &cpu_s) : 0;
  const int rc_ref = run_gpu(s.ref, inputs, o_ref, ref_iters, &ref_ms);
  const int rc_naive = run_gpu(s.naive, inputs, o_naive, naive_iters, &naive_ms);
  bool ok = rc_cpu == 0 && rc_ref == 0 && rc_naive == 0;
  std::string detail;
  char buf[256];
  for (size_t i = 0; i < out_like.size(); ++i) {
    if (with_cpu) {
      const Cmp c = compare(o_ref[i], o_cpu[i], atol, rtol);
      ok &= c.nonfinite == 0 && c.matched() >= ratio;
      std::snprintf(buf, sizeof buf, " %s:ref~cpu matched=%.6f max_abs=%.3g", out_names[i].c_str(), c.matched(),
                    c.max_abs);
      detail += buf;
    }
    const Cmp c = compare(o_naive[i], o_ref[i], atol, rtol);
    ok &= c.nonfinite == 0 && c.matched() >= ratio;
    std::snprintf(buf, sizeof buf, " %s:naive~ref matched=%.6f max_abs=%.3g", out_names[i].c_str(), c.matched(),
                  c.max_abs);
    detail += buf;
  }
  g_failures += ok ? 0 : 1;
  std::printf("%s rc=%d/%d/%d%s ref_ms=%.4f naive_ms=%.4f cpu_s=%.2f %s\n", label.c_str(), rc_cpu, rc_ref, rc_naive,
              detail.c_str(), ref_ms, naive_ms, cpu_s, ok ? "OK" : "FAIL");
  std::fflush(stdout);
}

Tensor scalar_f32(double v) {
  Tensor t(DType::kFloat32, {});
  t.set_from_double(0, v);
  return t;
}

// ---- GDN

void gdn_decode_case(const Solutions& s, int64_t B, uint64_t seed, bool with_cpu, const std::string& tag) {
  std::map<std::string, Tensor> in;
  if (!kda::contest::generate_gdn_decode({{"batch_size", B}}, seed, 0, in).ok()) std::exit(3);
  const Tensor scale = scalar_f32(0.08838834764831843);
  std::vector<const Tensor*> inputs;
  for (const char* n : {"q", "k", "v", "state", "A_log", "a", "dt_bias", "b"}) inputs.push_back(&in.at(n));
  inputs.push_back(&scale);
  std::vector<Tensor> outs;
  outs.emplace_back(DType::kBFloat16, std::vector<int64_t>{B, 1, 8, 128});
  outs.emplace_back(DType::kFloat32, std::vector<int64_t>{B, 8, 128, 128});
  char label[128];
  std::snprintf(label, sizeof label, "gdn_decode %s B=%3ld", tag.c_str(), (long)B);
  check_case(label, s, inputs, outs, {"output", "new_state"}, 1e-2, 1e-2, 1.0, with_cpu, 20, 20);
}

void gdn_prefill_case(const Solutions& s, int64_t T, int64_t N, uint64_t seed, bool with_cpu, const std::string& tag) {
  std::map<std::string, Tensor> in;
  if (!kda::contest::generate_gdn_prefill({{"total_seq_len", T}, {"num_seqs", N}, {"len_cu_seqlens", N + 1}}, seed, 0,
                                          in)
           .ok())
    std::exit(3);
  const Tensor scale = scalar_f32(0.08838834764831843);
  std::vector<const Tensor*> inputs;
  for (const char* n : {"q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens"})
    inputs.push_back(&in.at(n));
  inputs.push_back(&scale);
  std::vector<Tensor> outs;
  outs.emplace_back(DType::kBFloat16, std::vector<int64_t>{T, 8, 128});
  outs.emplace_back(DType::kFloat32, std::vector<int64_t>{N, 8, 128, 128});
  char label[128];
  std::snprintf(label, sizeof label, "gdn_prefill %s T=%5ld N=%2ld", tag.c_str(), (long)T, (long)N);
  const int ref_iters = T > 2048 ? 3 : 10;
  check_case(label, s, inputs, outs, {"output", "new_state"}, 1e-2, 1e-2, 1.0, with_cpu, ref_iters, 10);
}

// ---- MoE

// Fast approximate N(0,1) (sum of 4 uniforms, variance-corrected).
struct FastNormal {
  uint64_t s;
  explicit FastNormal(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  double next() {
    double u = 0;
    for (int k = 0; k < 4; ++k) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      u += static_cast<double>(s >> 11) * 0x1.0p-53;
    }
    return (u - 2.0) * 1.7320508075688772;
  }
};

void fill_fp8(Tensor& t, uint64_t seed) {
  static std::vector<uint8_t> table;  // code of clamp(v, -2, 2) for v on a 1/4096 grid
  if (table.empty())
    for (int i = 0; i <= 16384; ++i)
      table.push_back(kda::tensor::float_to_float8_e4m3fn(static_cast<float>(i / 4096.0 - 2.0)));
  FastNormal r(seed);
  uint8_t* p = t.data_as<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = std::clamp(r.next(), -2.0, 2.0);
    p[i] = table[static_cast<size_t>(std::lround((v + 2.0) * 4096.0))];
  }
}

void fill_f32(Tensor& t, uint64_t seed) {
  FastNormal r(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = static_cast<float>(r.next());
}

struct MoeWeights {
  Tensor w1{DType::kFloat8E4M3FN, {32, 4096, 7168}}, w1s{DType::kFloat32, {32, 32, 56}};
  Tensor w2{DType::kFloat8E4M3FN, {32, 7168, 2048}}, w2s{DType::kFloat32, {32, 56, 16}};
  MoeWeights() {
    fill_fp8(w1, 11);
    fill_fp8(w2, 12);
    fill_f32(w1s, 13);
    fill_f32(w2s, 14);
  }
};

void moe_case(const Solutions& s, const MoeWeights& w, int64_t T, int64_t offset, uint64_t seed, bool with_cpu,
              const std::string& tag) {
  std::map<std::string, Tensor> in;
  if (!kda::contest::generate_moe_ds_routing({{"seq_len", T}}, seed, 0, in).ok()) std::exit(3);
  Tensor hs(DType::kFloat8E4M3FN, {T, 7168}), hss(DType::kFloat32, {56, T});
  fill_fp8(hs, seed + 1);
  fill_f32(hss, seed + 2);
  Tensor off(DType::kInt32, {});
  off.set_from_double(0, static_cast<double>(offset));
  const Tensor rsf = scalar_f32(2.5);
  std::vector<const Tensor*> inputs = {
      &in.at("routing_logits"), &in.at("routing_bias"), &hs, &hss, &w.w1, &w.w1s, &w.w2, &w.w2s, &off, &rsf};
  // Local load, for the record.
  std::vector<float> bias(256);
  for (int e = 0; e < 256; ++e) bias[e] = kda::tensor::bfloat16_to_float(in.at("routing_bias").data_as<uint16_t>()[e]);
  std::vector<int> ids(T * 8);
  std::vector<float> wts(T * 8);
  kda::contest::moe_route(in.at("routing_logits").data_as<float>(), bias.data(), T, 256, 2.5f, ids.data(), wts.data());
  const auto load = kda::contest::moe_local_load(ids, offset);
  std::vector<Tensor> outs;
  outs.emplace_back(DType::kBFloat16, std::vector<int64_t>{T, 7168});
  char label[160];
  std::snprintf(label, sizeof label, "moe %s T=%5ld offset=%3ld pairs=%5ld experts=%2ld", tag.c_str(), (long)T,
                (long)offset, (long)load.pairs, (long)load.experts_touched);
  const int ref_iters = T > 1000 ? 3 : 10;
  check_case(label, s, inputs, outs, {"output"}, 1.0, 0.3, 0.9, with_cpu, ref_iters, 20);
  // Also how close the GPU reference is to the CPU one at a strict 1e-2 rule (informational only).
}

// ---- sweep over the pack workloads

std::vector<nlohmann::json> workloads(const std::string& def) {
  std::vector<nlohmann::json> v;
  for (const char* split : {"workloads", "holdout"}) {
    std::ifstream f("tasks/contest/" + def + "/" + split + ".jsonl");
    std::string line;
    while (std::getline(f, line))
      if (!line.empty()) {
        auto j = nlohmann::json::parse(line);
        j["split"] = split;
        v.push_back(j);
      }
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "build-gdn-moe-crosscheck";
  const std::string which = argc > 2 ? argv[2] : "all";
  const Solutions dec{load(dir + "/dec_cpu.so"), load(dir + "/dec_ref.so"), load(dir + "/dec_naive.so")};
  const Solutions pre{load(dir + "/pre_cpu.so"), load(dir + "/pre_ref.so"), load(dir + "/pre_naive.so")};
  const Solutions moe{load(dir + "/moe_cpu.so"), load(dir + "/moe_ref.so"), load(dir + "/moe_naive.so")};
  const bool all = which == "all";
  if (all || which == "gdn_decode")
    for (int64_t B : {1, 4, 16, 64}) gdn_decode_case(dec, B, 100 + B, true, "case");
  if (all || which == "gdn_prefill") {
    const std::vector<std::pair<int64_t, int64_t>> cases = {{1, 1},   {1, 2},    {3, 5},     {57, 57},
                                                            {300, 3}, {1024, 2}, {2000, 16}, {8192, 1}};
    for (auto [T, N] : cases) gdn_prefill_case(pre, T, N, 200 + T + N, true, T < N ? "edge" : "case");
  }
  if (all || which == "moe" || which == "sweep" || which == "sweep_moe") {
    const MoeWeights w;
    if (all || which == "moe") {
      const std::vector<std::pair<int64_t, int64_t>> cases = {{1, 32}, {1, 0}, {7, 128}, {16, 32}, {56, 160}, {80, 96}};
      for (auto [T, off] : cases) moe_case(moe, w, T, off, 300 + T + off, true, "case");
      moe_case(moe, w, 901, 64, 901, false, "large");
    }
    if (which == "sweep" || which == "sweep_moe")
      for (const auto& j : workloads(kMoe)) {
        const auto& wl = j.at("workload");
        moe_case(moe, w, wl.at("axes").at("seq_len"), wl.at("inputs").at("local_expert_offset").at("value"),
                 kda::contest::workload_seed_from_uuid(wl.at("uuid").get<std::string>()), false,
                 std::string(j.at("split").get<std::string>()) + " " + wl.at("uuid").get<std::string>().substr(0, 8));
      }
  }
  if (which == "sweep" || which == "sweep_gdn") {
    for (const auto& j : workloads(kDecode)) {
      const auto& wl = j.at("workload");
      gdn_decode_case(
          dec, wl.at("axes").at("batch_size"), kda::contest::workload_seed_from_uuid(wl.at("uuid").get<std::string>()),
          false, std::string(j.at("split").get<std::string>()) + " " + wl.at("uuid").get<std::string>().substr(0, 8));
    }
    for (const auto& j : workloads(kPrefill)) {
      const auto& wl = j.at("workload");
      gdn_prefill_case(
          pre, wl.at("axes").at("total_seq_len"), wl.at("axes").at("num_seqs"),
          kda::contest::workload_seed_from_uuid(wl.at("uuid").get<std::string>()), false,
          std::string(j.at("split").get<std::string>()) + " " + wl.at("uuid").get<std::string>().substr(0, 8));
    }
  }
  std::printf("failures: %d\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
