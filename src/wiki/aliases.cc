#include "wiki/aliases.h"

#include <fmt/format.h>

#include "util/fs.h"
#include "util/strings.h"
#include "wiki/tokenizer.h"

namespace kda::wiki {

namespace {

constexpr const char* kBuiltinAliases = R"(# canonical: alternatives
sm90: hopper, h100, h200, h800, gh200, sm_90, sm_90a, sm90a, compute_90a
sm100: blackwell, b200, b100, gb200, sm_100, sm_100a, sm100a
sm80: ampere, a100, sm_80
tma: tensor memory accelerator, cp.async.bulk, cp.async.bulk.tensor
umma: tcgen05, tcgen05.mma
wgmma: warpgroup mma, wgmma.mma_async, warpgroup matrix multiply
gdn: gated delta net, gated delta rule, gated deltanet, gated_delta_rule
dsa: deepseek sparse attention
mla: multi-head latent attention, multi head latent attention
moe: mixture of experts, fused moe
)";

}  // namespace

Result<AliasTable> AliasTable::parse(std::string_view text, const std::string& origin) {
  AliasTable t;
  size_t line_no = 0, pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::string l = util::trimmed(line);
    if (l.empty()) continue;
    size_t colon = l.find(": ");
    if (colon == std::string::npos && !l.empty() && l.back() == ':') colon = l.size() - 1;
    if (colon == std::string::npos)
      return Status::bad_input(fmt::format("{}:{}: expected 'canonical: alias, alias, ...'", origin, line_no));
    AliasGroup g;
    g.canonical = ascii_lower(util::trimmed(l.substr(0, colon)));
    if (g.canonical.empty()) return Status::bad_input(fmt::format("{}:{}: empty canonical name", origin, line_no));
    g.members.push_back(g.canonical);
    std::string rest = l.substr(colon + 1);
    size_t s = 0;
    while (s <= rest.size()) {
      size_t c = rest.find(',', s);
      if (c == std::string::npos) c = rest.size();
      std::string m = util::trimmed(std::string_view(rest).substr(s, c - s));
      if (!m.empty()) g.members.push_back(m);
      s = c + 1;
    }
    size_t gi = t.groups_.size();
    for (const auto& m : g.members) {
      auto parts = identifier_parts(m);
      if (parts.empty()) continue;
      t.max_parts_ = std::max(t.max_parts_, parts.size());
      t.keys_.emplace_back(std::move(parts), gi);
    }
    t.groups_.push_back(std::move(g));
  }
  return t;
}

Result<AliasTable> AliasTable::load(const std::filesystem::path& file) {
  KDA_ASSIGN_OR_RETURN(std::string text, fs::read_file(file));
  return parse(text, file.string());
}

const AliasTable& AliasTable::builtin() {
  static const AliasTable kTable = std::move(parse(kBuiltinAliases, "<builtin>")).value();
  return kTable;
}

const AliasGroup* AliasTable::find(const std::vector<std::string>& parts) const {
  for (const auto& [k, gi] : keys_)
    if (k == parts) return &groups_[gi];
  return nullptr;
}

std::string AliasTable::canonical(std::string_view value) const {
  const AliasGroup* g = find(identifier_parts(value));
  return g ? g->canonical : ascii_lower(value);
}

}  // namespace kda::wiki
