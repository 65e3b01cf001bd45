#include "wiki/facets.h"

#include <unordered_map>

#include "wiki/tokenizer.h"

namespace kda::wiki {

namespace {

struct FacetValue {
  int facet;  // 0 arch, 1 op, 2 technique
  const char* value;
};

// Term (whole identifiers and parts, lowercase) -> facet value.
const std::unordered_map<std::string, FacetValue>& term_facets() {
  static const std::unordered_map<std::string, FacetValue> k = {
      {"sm90", {0, "sm90"}},
      {"sm_90", {0, "sm90"}},
      {"sm90a", {0, "sm90"}},
      {"sm_90a", {0, "sm90"}},
      {"hopper", {0, "sm90"}},
      {"h100", {0, "sm90"}},
      {"h200", {0, "sm90"}},
      {"wgmma", {0, "sm90"}},
      {"setmaxnreg", {0, "sm90"}},
      {"sm100", {0, "sm100"}},
      {"sm_100", {0, "sm100"}},
      {"sm100a", {0, "sm100"}},
      {"sm_100a", {0, "sm100"}},
      {"blackwell", {0, "sm100"}},
      {"b200", {0, "sm100"}},
      {"tcgen05", {0, "sm100"}},
      {"umma", {0, "sm100"}},
      {"sm80", {0, "sm80"}},
      {"sm_80", {0, "sm80"}},
      {"ampere", {0, "sm80"}},
      {"a100", {0, "sm80"}},
      {"sm89", {0, "sm89"}},
      {"sm_89", {0, "sm89"}},
      {"sm120", {0, "sm120"}},
      {"gemm", {1, "gemm"}},
      {"matmul", {1, "gemm"}},
      {"gemv", {1, "gemm"}},
      {"attention", {1, "attention"}},
      {"flash_attn", {1, "attention"}},
      {"mha", {1, "attention"}},
      {"mla", {1, "attention"}},
      {"fmha", {1, "attention"}},
      {"softmax", {1, "softmax"}},
      {"moe", {1, "moe"}},
      {"topk", {1, "topk"}},
      {"top_k", {1, "topk"}},
      {"radix_select", {1, "topk"}},
      {"conv", {1, "conv"}},
      {"conv2d", {1, "conv"}},
      {"rmsnorm", {1, "norm"}},
      {"layernorm", {1, "norm"}},
      {"layer_norm", {1, "norm"}},
      {"rms_norm", {1, "norm"}},
      {"gdn", {1, "gdn"}},
      {"gated_delta_rule", {1, "gdn"}},
      {"delta_rule", {1, "gdn"}},
      {"dsa", {1, "dsa"}},
      {"sampling", {1, "sampling"}},
      {"rope", {1, "rope"}},
      {"reduction", {1, "reduction"}},
      {"tma", {2, "tma"}},
      {"cp_async_bulk", {2, "tma"}},
      {"cp_async_bulk_tensor", {2, "tma"}},
      {"wgmma", {2, "wgmma"}},
      {"warpgroup", {2, "wgmma"}},
      {"mbarrier", {2, "mbarrier"}},
      {"warp_specialized", {2, "warp-specialization"}},
      {"warpspecialized", {2, "warp-specialization"}},
      {"pingpong", {2, "warp-specialization"}},
      {"producer_consumer", {2, "warp-specialization"}},
      {"setmaxnreg", {2, "setmaxnreg"}},
      {"persistent", {2, "persistent"}},
      {"stream_k", {2, "split-k"}},
      {"streamk", {2, "split-k"}},
      {"split_k", {2, "split-k"}},
      {"splitk", {2, "split-k"}},
      {"swizzle", {2, "swizzle"}},
      {"fp8", {2, "fp8"}},
      {"e4m3", {2, "fp8"}},
      {"e5m2", {2, "fp8"}},
      {"cluster", {2, "cluster"}},
      {"multicast", {2, "cluster"}},
      {"dsmem", {2, "cluster"}},
      {"pipeline", {2, "pipelining"}},
      {"cp_async", {2, "pipelining"}},
      {"vectorized", {2, "vectorized-access"}},
      {"float4", {2, "vectorized-access"}},
      {"fused", {2, "fusion"}},
      {"fusion", {2, "fusion"}},
      {"epilogue", {2, "fusion"}},
      {"paged", {2, "paged-kv"}},
      {"page_table", {2, "paged-kv"}},
      {"block_table", {2, "paged-kv"}},
      {"kv_cache", {2, "paged-kv"}},
      {"ldmatrix", {2, "ldmatrix"}},
  };
  return k;
}

void add(Facets& f, int facet, const std::string& v) {
  (facet == 0 ? f.arch : facet == 1 ? f.op : f.technique).insert(v);
}

}  // namespace

std::string Facets::joined(const std::set<std::string>& s) {
  std::string r = " ";
  for (const auto& v : s) r += v + " ";
  return r;
}

Facets detect_facets(std::string_view text, const std::vector<std::string>& tags) {
  Facets f;
  const auto& map = term_facets();
  // Terms, and pairs of adjacent parts ("split k", "SplitK" -> split_k), so facets match however the
  // identifier is written.
  std::string prev, pair;
  for_each_term(text, [&](const Term& t) {
    if (auto it = map.find(t.text); it != map.end()) add(f, it->second.facet, it->second.value);
    if (!t.colocated) {
      if (!prev.empty()) {
        pair = prev + "_" + t.text;
        if (auto it = map.find(pair); it != map.end()) add(f, it->second.facet, it->second.value);
      }
      prev = t.text;
    }
    return true;
  });
  for (const auto& raw : tags) {
    std::string tag = ascii_lower(raw);
    size_t colon = tag.find(':');
    if (colon != std::string::npos) {
      std::string k = tag.substr(0, colon), v = tag.substr(colon + 1);
      if (k == "arch")
        add(f, 0, v);
      else if (k == "op")
        add(f, 1, v);
      else if (k == "technique")
        add(f, 2, v);
      continue;
    }
    std::string w = whole_term(tag);
    if (w.empty()) w = tag;
    if (auto it = map.find(w); it != map.end()) add(f, it->second.facet, it->second.value);
  }
  return f;
}

}  // namespace kda::wiki
