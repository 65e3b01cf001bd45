#include "build/ptxas.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <regex>

#include <nlohmann/json.hpp>

namespace kda::build {

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : name;
}

namespace {

// "<N> bytes <what>" anywhere in the line.
int64_t bytes_of(const std::string& line, const std::string& what) {
  std::regex re("(\\d+) bytes " + what);
  std::smatch m;
  return std::regex_search(line, m, re) ? std::stoll(m[1]) : 0;
}

}  // namespace

std::vector<KernelResources> parse_ptxas_log(std::string_view log) {
  static const std::regex entry_re(R"(Compiling entry function '([^']+)' for '([^']+)')");
  static const std::regex props_re(R"(Function properties for (\S+))");
  static const std::regex used_re(R"(Used (\d+) registers)");
  static const std::regex barriers_re(R"(used (\d+) barriers)");

  std::vector<KernelResources> kernels;
  std::map<std::string, size_t> index;  // name -> position in kernels (entry functions only)
  std::string current;                  // function the next property lines belong to
  bool current_is_entry = false;
  size_t pos = 0;
  while (pos < log.size()) {
    size_t end = log.find('\n', pos);
    if (end == std::string_view::npos) end = log.size();
    std::string line(log.substr(pos, end - pos));
    pos = end + 1;
    std::smatch m;
    if (std::regex_search(line, m, entry_re)) {
      current = m[1];
      current_is_entry = true;
      if (!index.count(current)) {
        index[current] = kernels.size();
        KernelResources k;
        k.name = current;
        k.demangled = demangle(current);
        k.arch = m[2];
        kernels.push_back(std::move(k));
      }
    } else if (std::regex_search(line, m, props_re)) {
      current = m[1];
      current_is_entry = index.count(current) > 0;
    } else if (current_is_entry && line.find("stack frame") != std::string::npos) {
      auto& k = kernels[index[current]];
      k.stack = bytes_of(line, "stack frame");
      k.spill_stores = bytes_of(line, "spill stores");
      k.spill_loads = bytes_of(line, "spill loads");
    } else if (current_is_entry && std::regex_search(line, m, used_re)) {
      auto& k = kernels[index[current]];
      k.registers = std::stoi(m[1]);
      if (std::regex_search(line, m, barriers_re)) k.barriers = std::stoi(m[1]);
      k.shared_mem_static = bytes_of(line, "smem");
    }
  }
  return kernels;
}

void to_json(nlohmann::json& j, const KernelResources& k) {
  j = nlohmann::json{{"name", k.name},
                     {"demangled", k.demangled},
                     {"arch", k.arch},
                     {"registers", k.registers},
                     {"barriers", k.barriers},
                     {"shared_mem_static", k.shared_mem_static},
                     {"spill_stores", k.spill_stores},
                     {"spill_loads", k.spill_loads},
                     {"stack", k.stack}};
}

void from_json(const nlohmann::json& j, KernelResources& k) {
  k.name = j.value("name", "");
  k.demangled = j.value("demangled", k.name);
  k.arch = j.value("arch", "");
  k.registers = j.value("registers", 0);
  k.barriers = j.value("barriers", 0);
  k.shared_mem_static = j.value("shared_mem_static", int64_t{0});
  k.spill_stores = j.value("spill_stores", int64_t{0});
  k.spill_loads = j.value("spill_loads", int64_t{0});
  k.stack = j.value("stack", int64_t{0});
}

}  // namespace kda::build
