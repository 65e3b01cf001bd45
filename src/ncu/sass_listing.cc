#include "ncu/sass_listing.h"

#include <cctype>

#include "proc/subprocess.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kda::ncu {

namespace {

// ".section\t.text._Z4smemPf,\"ax\",@progbits" or ".text._Z4smemPf:" -> "_Z4smemPf".
std::optional<std::string> text_section_name(std::string_view line) {
  line = util::trim_space(line);
  if (line.starts_with(".section")) {
    line = util::trim_space(line.substr(8));
  } else if (!(line.starts_with(".text.") && line.ends_with(':'))) {
    return std::nullopt;
  }
  if (!line.starts_with(".text.")) return std::nullopt;
  line.remove_prefix(6);
  const size_t end = line.find_first_of(",: \t");
  return std::string(line.substr(0, end));
}

}  // namespace

SassListing parse_nvdisasm_listing(std::string_view text) {
  SassListing out;
  std::string current;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (auto name = text_section_name(line)) {
      current = *name;
      continue;
    }
    std::string_view t = util::trim_space(line);
    if (current.empty() || !t.starts_with("/*")) continue;
    const size_t close = t.find("*/");
    if (close == std::string_view::npos || close <= 2) continue;
    const std::string_view hex = t.substr(2, close - 2);
    uint64_t offset = 0;
    bool ok = !hex.empty() && hex.size() <= 16;
    for (char c : hex) {
      const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                    : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                                : -1;
      if (d < 0) {
        ok = false;
        break;
      }
      offset = offset * 16 + static_cast<uint64_t>(d);
    }
    if (!ok) continue;  // an encoding comment ("/* 0x000fe4... */") on its own line
    std::string_view ins = util::trim_space(t.substr(close + 2));
    if (const size_t semi = ins.find(';'); semi != std::string_view::npos) ins = ins.substr(0, semi);
    ins = util::trim_space(ins);
    if (ins.starts_with('{')) ins = util::trim_space(ins.substr(1));  // dual-issue braces of older architectures
    if (ins.ends_with('}')) ins = util::trim_space(ins.substr(0, ins.size() - 1));
    if (ins.empty()) continue;
    out[current][offset] = std::string(ins);
  }
  return out;
}

std::optional<std::filesystem::path> find_nvdisasm() {
  if (auto p = proc::find_program("nvdisasm"); p.ok()) return *p;
  std::error_code ec;
  const std::filesystem::path fallback = "/usr/local/cuda/bin/nvdisasm";
  if (std::filesystem::is_regular_file(fallback, ec)) return fallback;
  return std::nullopt;
}

Result<SassListing> disassemble_cubin(std::string_view cubin, const std::filesystem::path& nvdisasm, double timeout_s) {
  KDA_ASSIGN_OR_RETURN(std::filesystem::path dir,
                       fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-nvdisasm"));
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  const std::filesystem::path file = dir / "kernel.cubin";
  KDA_RETURN_IF_ERROR(fs::write_file_atomic(file, cubin));
  proc::RunOptions o;
  o.argv = {nvdisasm.string(), "-c", file.string()};
  o.timeout_seconds = timeout_s;
  o.output_cap = 64 << 20;
  KDA_ASSIGN_OR_RETURN(proc::RunResult r, proc::run(o));
  if (!r.exit.success()) {
    std::string err = std::string(util::trim_space(r.stderr_text.substr(0, 400)));
    return Status::io(nvdisasm.string() + " " + r.exit.describe() + (err.empty() ? "" : ": " + err));
  }
  SassListing listing = parse_nvdisasm_listing(r.stdout_text);
  if (listing.empty()) return Status::io(nvdisasm.string() + " printed no instructions");
  return listing;
}

std::string sass_opcode(std::string_view text) {
  std::string_view t = util::trim_space(text);
  if (t.starts_with('@')) {
    const size_t sp = t.find_first_of(" \t");
    t = sp == std::string_view::npos ? std::string_view() : util::trim_space(t.substr(sp));
  }
  return std::string(t.substr(0, t.find_first_of(" \t")));
}

}  // namespace kda::ncu
