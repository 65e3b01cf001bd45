#include "task/solution.h"

#include <algorithm>
#include <array>
#include <set>

#include "task/build_options.h"
#include "task/definition.h"
#include "task/workload.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::task {

namespace {

constexpr std::array<std::string_view, 5> kLanguages{"python", "triton", "cpp", "cuda", "tilelang"};

void parse_spec(const ojson& j, JsonReader& r, SolutionSpec& spec) {
  const ojson* s = r.member(j, "", "spec", true);
  if (s == nullptr || !r.expect_object(*s, "/spec")) return;
  if (auto lang = r.string(*s, "/spec", "language", true)) {
    if (std::find(kLanguages.begin(), kLanguages.end(), *lang) == kLanguages.end())
      r.error("/spec/language", "language must be one of python, triton, cpp, cuda, tilelang; got \"" + *lang + "\"");
    spec.language = *lang;
  }
  if (auto hw = r.string_list(*s, "/spec", "target_hardware", true)) {
    if (hw->empty()) r.error("/spec/target_hardware", "must list at least one target");
    spec.target_hardware = *hw;
  }
  if (auto ep = r.string(*s, "/spec", "entry_point", true)) {
    spec.entry_point = *ep;
    size_t pos = ep->find("::");
    if (pos == std::string::npos || ep->find("::", pos + 2) != std::string::npos)
      r.error("/spec/entry_point",
              "entry point must be \"<file>::<function>\" with exactly one '::', got \"" + *ep + "\"");
    else if (pos == 0 || pos + 2 == ep->size())
      r.error("/spec/entry_point", "entry point needs both a file and a function: \"" + *ep + "\"");
  }
  spec.dependencies = r.string_list(*s, "/spec", "dependencies", false).value_or(std::vector<std::string>{});
  spec.destination_passing_style = r.boolean(*s, "/spec", "destination_passing_style", false).value_or(true);
  if (auto b = r.string(*s, "/spec", "binding", false)) {
    if (*b != "tvm-ffi" && *b != "torch")
      r.error("/spec/binding", "binding must be \"tvm-ffi\", \"torch\" or null, got \"" + *b + "\"");
    spec.binding = *b;
  }
}

void parse_sources(const ojson& j, JsonReader& r, const std::filesystem::path* source_dir,
                   std::vector<SourceFile>& out) {
  const ojson* srcs = r.member(j, "", "sources", true);
  if (srcs == nullptr) return;
  if (!srcs->is_array()) {
    r.error("/sources", "must be a list of {path, content}, not " + json_type_name(*srcs));
    return;
  }
  if (srcs->empty()) r.error("/sources", "a solution needs at least one source file");
  std::set<std::string> seen;
  for (size_t i = 0; i < srcs->size(); ++i) {
    std::string p = child_pointer("/sources", i);
    const ojson& s = (*srcs)[i];
    if (!r.expect_object(s, p)) continue;
    auto path = r.string(s, p, "path", true, /*non_empty=*/true);
    if (!path) continue;
    if (!is_safe_relative_path(*path)) {
      r.error(child_pointer(p, "path"), "source path must be relative, without '..': \"" + *path + "\"");
      continue;
    }
    std::string norm = std::filesystem::path(*path).lexically_normal().generic_string();
    if (!seen.insert(norm).second) r.error(child_pointer(p, "path"), "duplicate source path \"" + *path + "\"");
    SourceFile f{.path = *path};
    if (auto content = r.string(s, p, "content", source_dir == nullptr)) {
      f.content = *content;
    } else if (source_dir != nullptr && (!s.contains("content") || s.at("content").is_null())) {
      auto text = fs::read_file(*source_dir / *path);
      if (!text.ok()) {
        r.error(child_pointer(p, "content"), "no inline content and " + (*source_dir / *path).string() +
                                                 " cannot be read: " + text.status().message());
        continue;
      }
      f.content = std::move(*text);
    }
    out.push_back(std::move(f));
  }
}

}  // namespace

std::string SolutionSpec::entry_file() const {
  size_t pos = entry_point.find("::");
  return pos == std::string::npos ? entry_point : entry_point.substr(0, pos);
}

std::string SolutionSpec::entry_function() const {
  size_t pos = entry_point.find("::");
  return pos == std::string::npos ? "" : entry_point.substr(pos + 2);
}

const SourceFile* Solution::source(const std::string& path) const {
  for (const auto& s : sources)
    if (s.path == path) return &s;
  return nullptr;
}

nlohmann::json Solution::to_json() const {
  nlohmann::json srcs = nlohmann::json::array();
  for (const auto& s : sources) srcs.push_back({{"path", s.path}, {"content", s.content}});
  nlohmann::json j{{"name", name},
                   {"definition", definition},
                   {"author", author},
                   {"spec",
                    {{"language", spec.language},
                     {"target_hardware", spec.target_hardware},
                     {"entry_point", spec.entry_point},
                     {"dependencies", spec.dependencies},
                     {"destination_passing_style", spec.destination_passing_style},
                     {"binding", spec.binding ? nlohmann::json(*spec.binding) : nlohmann::json(nullptr)}}},
                   {"sources", std::move(srcs)}};
  if (!description.empty()) j["description"] = description;
  return j;
}

std::optional<Solution> solution_from_json(const ojson& j, const std::string& file, Diagnostics& diags,
                                           const std::filesystem::path* source_dir) {
  JsonReader r(file, 0, diags);
  if (!r.expect_object(j, "")) return std::nullopt;
  Solution s;
  s.name = r.string(j, "", "name", true, /*non_empty=*/true).value_or("");
  s.definition = r.string(j, "", "definition", true, /*non_empty=*/true).value_or("");
  s.author = r.string(j, "", "author", true).value_or("");
  s.description = r.string(j, "", "description", false).value_or("");
  parse_spec(j, r, s.spec);
  parse_sources(j, r, source_dir, s.sources);
  if (s.spec.entry_point.find("::") != std::string::npos && !s.sources.empty() &&
      s.source(s.spec.entry_file()) == nullptr)
    r.error("/spec/entry_point", "entry file \"" + s.spec.entry_file() + "\" is not among the sources");
  if (r.errors() > 0) return std::nullopt;
  return s;
}

std::optional<Solution> load_solution(const std::filesystem::path& path, Diagnostics& diags) {
  std::error_code ec;
  std::filesystem::path file = std::filesystem::is_directory(path, ec) ? path / "solution.json" : path;
  auto text = fs::read_file(file);
  if (!text.ok()) {
    diags.add(file.string(), 0, "", text.status().message());
    return std::nullopt;
  }
  auto j = parse_json_text(*text, file.string(), 0, diags);
  if (!j) return std::nullopt;
  std::filesystem::path dir = file.parent_path();
  if (dir.empty()) dir = ".";
  return solution_from_json(*j, file.string(), diags, &dir);
}

std::vector<std::string> unlisted_option_files(const Solution& solution, const std::filesystem::path& path) {
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(path, ec);
  std::vector<std::string> unlisted;
  if (!is_dir && path.filename() != "solution.json") return unlisted;  // a JSON among others (a dataset's)
  const std::filesystem::path dir = is_dir ? path : path.parent_path();
  if (solution.spec.language != "cpp" && solution.spec.language != "cuda") return unlisted;  // built ones only
  for (const char* name : {kBuildOptionsFile})
    if (solution.source(name) == nullptr && std::filesystem::is_regular_file(dir / name, ec)) unlisted.push_back(name);
  return unlisted;
}

std::string unlisted_option_warning(const std::string& name) {
  return name + " lies beside solution.json but is not among its sources, so kda does not read it: add {\"path\": \"" +
         name + "\"} to \"sources\" to use it";
}

Result<Solution> load_solution(const std::filesystem::path& path) {
  Diagnostics diags;
  auto s = load_solution(path, diags);
  if (!s) return diagnostics_status(diags);
  return std::move(*s);
}

std::string solution_hash(const Solution& s) {
  Sha256 h;
  h.update_field("kda.solution.v1");
  h.update_field(s.definition);
  h.update_field(s.spec.language);
  h.update_field(s.spec.entry_point);
  h.update_field(s.spec.binding ? "binding:" + *s.spec.binding : "binding:null");
  h.update_field(std::to_string(s.spec.dependencies.size()));
  for (const auto& d : s.spec.dependencies) h.update_field(d);
  h.update_field(s.spec.destination_passing_style ? "dps:true" : "dps:false");
  std::vector<const SourceFile*> sorted;
  for (const auto& f : s.sources) sorted.push_back(&f);
  std::sort(sorted.begin(), sorted.end(), [](const SourceFile* a, const SourceFile* b) { return a->path < b->path; });
  h.update_field(std::to_string(sorted.size()));
  for (const auto* f : sorted) {
    h.update_field(f->path);
    h.update_field(f->content);
  }
  return h.hex_digest();
}

std::vector<std::string> fib_solution_errors(const nlohmann::json& j) {
  std::vector<std::string> errors;
  auto need_string = [&](const nlohmann::json& o, const char* key, const std::string& at) {
    if (!o.contains(key) || !o[key].is_string() || o[key].get<std::string>().empty())
      errors.push_back(at + "/" + key + ": a non-empty string is required");
  };
  if (!j.is_object()) return {": a Solution is a JSON object"};
  for (const char* key : {"name", "definition", "author"}) need_string(j, key, "");
  const auto spec = j.value("spec", nlohmann::json());
  if (!spec.is_object()) {
    errors.push_back("/spec: an object is required");
  } else {
    static const std::set<std::string> kLanguages = {"python", "triton", "cpp", "cuda", "tilelang"};
    if (!spec.contains("language") || !spec["language"].is_string() ||
        !kLanguages.count(spec["language"].get<std::string>()))
      errors.push_back("/spec/language: one of python, triton, cpp, cuda, tilelang is required");
    const auto hw = spec.value("target_hardware", nlohmann::json());
    if (!hw.is_array() || hw.empty())
      errors.push_back("/spec/target_hardware: a non-empty list is required");
    else
      for (size_t i = 0; i < hw.size(); ++i)
        if (!hw[i].is_string() || hw[i].get<std::string>().empty())
          errors.push_back("/spec/target_hardware/" + std::to_string(i) + ": a non-empty string is required");
    need_string(spec, "entry_point", "/spec");
    if (spec.contains("dependencies") && !spec["dependencies"].is_null() && !spec["dependencies"].is_array())
      errors.push_back("/spec/dependencies: a list is required");
    if (spec.contains("binding") && !spec["binding"].is_null() &&
        !(spec["binding"] == "tvm-ffi" || spec["binding"] == "torch"))
      errors.push_back("/spec/binding: tvm-ffi, torch or null");
    if (spec.contains("destination_passing_style") && !spec["destination_passing_style"].is_boolean())
      errors.push_back("/spec/destination_passing_style: a boolean is required");
  }
  const auto sources = j.value("sources", nlohmann::json());
  std::set<std::string> paths;
  if (!sources.is_array() || sources.empty()) {
    errors.push_back("/sources: a non-empty list is required");
  } else {
    for (size_t i = 0; i < sources.size(); ++i) {
      const std::string at = "/sources/" + std::to_string(i);
      const auto& src = sources[i];
      if (!src.is_object()) {
        errors.push_back(at + ": an object {path, content} is required");
        continue;
      }
      need_string(src, "path", at);
      if (!src.contains("content") || !src["content"].is_string())
        errors.push_back(at +
                         "/content: required (kda's directory form leaves it out; `kda solution export` inlines it)");
      const std::string path = src.value("path", "");
      const std::filesystem::path p(path);
      if (p.is_absolute() || std::count(p.begin(), p.end(), std::filesystem::path("..")))
        errors.push_back(at + "/path: '" + path + "' must be relative, without '..'");
      if (!path.empty() && !paths.insert(path).second) errors.push_back(at + "/path: duplicate '" + path + "'");
    }
  }
  const std::string ep = spec.is_object() ? spec.value("entry_point", "") : "";
  const auto sep = ep.find("::");
  if (!ep.empty() && (sep == std::string::npos || sep == 0 || sep + 2 >= ep.size()))
    errors.push_back("/spec/entry_point: '" + ep + "' is not <file>::<function>");
  else if (!ep.empty() && !paths.empty() && !paths.count(ep.substr(0, sep)))
    errors.push_back("/spec/entry_point: '" + ep.substr(0, sep) + "' is not among the sources");
  return errors;
}

std::optional<std::string> not_evaluable_reason(const Solution& solution) {
  const auto& spec = solution.spec;
  if (spec.language != "cpp" && spec.language != "cuda" && spec.language != "python" && spec.language != "triton")
    return "language \"" + spec.language +
           "\" is not built by this version of kda (it builds cpp and cuda solutions and runs python and triton ones)";
  if (spec.binding == "torch" && spec.language != "cpp" && spec.language != "cuda")
    return "binding \"torch\" is for cpp and cuda solutions (a " + spec.language + " solution is imported as it is)";
  if (spec.binding == "tvm-ffi" && !spec.destination_passing_style)
    return "binding \"tvm-ffi\" with destination_passing_style false (outputs returned by the function) is not "
           "supported by this version of kda: take the outputs as the last parameters";
  return std::nullopt;
}

}  // namespace kda::task
