#include "serve/dataset.h"

#include <fmt/format.h>

#include "task/manifest.h"
#include "task/task_pack.h"
#include "util/fs.h"
#include "util/sha256.h"

namespace kda::serve {

namespace stdfs = std::filesystem;

bool Entry::has_visible(const std::string& uuid) const {
  for (const auto& w : workloads)
    if (w.value("uuid", "") == uuid) return true;
  return false;
}

const Entry* Dataset::find(const std::string& name) const {
  auto it = entries.find(name);
  return it == entries.end() ? nullptr : &it->second;
}

std::pair<const Entry*, const nlohmann::json*> Dataset::find_workload(const std::string& uuid) const {
  for (const auto& [name, e] : entries)
    for (const auto& w : e.workloads)
      if (w.value("uuid", "") == uuid) return {&e, &w};
  return {nullptr, nullptr};
}

namespace {

Entry entry_of(const task::TaskPack& pack) {
  Entry e;
  e.name = pack.definition.name;
  e.definition = pack.definition.to_json();
  for (const auto& w : pack.workloads) e.workloads.push_back(w.to_json());
  for (const auto& w : pack.holdout) e.holdout.insert(w.uuid);
  return e;
}

// A FlashInfer-Bench definition and its workloads as loaded, hashed in file order.
std::string fib_digest(const task::TaskPack& pack) {
  std::string text = pack.definition.to_json().dump();
  for (const auto& w : pack.workloads) text += "\n" + w.to_json().dump();
  return sha256_hex(text);
}

Result<Dataset> load_fib(const stdfs::path& dir) {
  Dataset d{.root = dir, .kind = "flashinfer-bench"};
  std::string problems, digest_text;
  for (const auto& [name, file] : task::fib_definition_files(dir)) {
    auto pack = task::load_fib_definition(dir, name, task::Backend::kHost);
    if (!pack.ok()) {
      problems += fmt::format("\n  {}: {}", file.string(), pack.status().message());
      continue;
    }
    Entry e = entry_of(*pack);
    e.fib_root = dir;
    digest_text += name + " " + fib_digest(*pack) + "\n";
    d.entries.emplace(name, std::move(e));
  }
  if (!problems.empty())
    return Status::bad_input(fmt::format("--local {}: definitions that do not load:{}", dir.string(), problems));
  d.id = sha256_hex(digest_text);
  return d;
}

Result<Dataset> load_packs(const stdfs::path& dir, const std::vector<stdfs::path>& packs) {
  Dataset d{.root = dir, .kind = "packs"};
  std::string problems, digest_text;
  for (const auto& p : packs) {
    auto pack = task::load_task_pack(p);
    if (!pack.ok()) {
      problems += fmt::format("\n  {}: {}", p.string(), pack.status().message());
      continue;
    }
    auto manifest = task::pack_manifest(p);
    if (!manifest.ok()) return manifest.status();
    Entry e = entry_of(*pack);
    e.pack_dir = p;
    e.manifest = task::judged_part(*manifest).to_json();
    if (const Entry* other = d.find(e.name)) {
      problems += fmt::format("\n  {}: defines '{}', as {} does", p.string(), e.name, other->pack_dir.string());
      continue;
    }
    digest_text += e.name + " " + manifest->digest() + "\n";
    d.entries.emplace(e.name, std::move(e));
  }
  if (!problems.empty())
    return Status::bad_input(fmt::format("--local {}: packs that do not load:{}", dir.string(), problems));
  d.id = sha256_hex(digest_text);
  return d;
}

}  // namespace

Result<Dataset> load_dataset(const stdfs::path& dir) {
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec))
    return Status::not_found(fmt::format("--local {}: no such directory", dir.string()));
  if (stdfs::is_directory(dir / "definitions", ec) && !task::is_task_pack(dir)) return load_fib(dir);
  std::vector<stdfs::path> packs;
  if (task::is_task_pack(dir))
    packs.push_back(dir);
  else
    packs = task::find_task_packs(dir);
  if (packs.empty())
    return Status::not_found(fmt::format(
        "--local {}: neither a FlashInfer-Bench dataset (definitions/) nor a kda task pack, nor a directory of packs",
        dir.string()));
  return load_packs(dir, packs);
}

}  // namespace kda::serve
