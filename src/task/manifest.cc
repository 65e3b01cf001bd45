#include "task/manifest.h"

#include <system_error>

#include "util/sha256.h"

namespace kda::task {

std::string Manifest::digest() const {
  Sha256 h;
  h.update_field("kda.manifest.v1");
  for (const auto& [path, sha] : files) {
    h.update_field(path);
    h.update_field(sha);
  }
  return h.hex_digest();
}

nlohmann::json Manifest::to_json() const { return {{"digest", digest()}, {"files", files}}; }

Result<Manifest> pack_manifest(const std::filesystem::path& dir) {
  namespace stdfs = std::filesystem;
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec)) return Status::not_found(dir.string() + ": not a directory");
  Manifest m;
  stdfs::recursive_directory_iterator it(dir, stdfs::directory_options::none, ec), end;
  if (ec) return Status::io(dir.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return Status::io(dir.string() + ": " + ec.message());
    const auto& entry = *it;
    std::string rel = entry.path().lexically_relative(dir).generic_string();
    if (entry.is_symlink(ec)) {
      auto target = stdfs::read_symlink(entry.path(), ec);
      m.files[rel] = sha256_hex("symlink:" + target.generic_string());
      continue;
    }
    if (!entry.is_regular_file(ec)) continue;
    KDA_ASSIGN_OR_RETURN(std::string sha, sha256_file_hex(entry.path()));
    m.files[rel] = std::move(sha);
  }
  if (ec) return Status::io(dir.string() + ": " + ec.message());
  return m;
}

Manifest judged_part(const Manifest& m) {
  Manifest out;
  for (const auto& [path, sha] : m.files)
    if (path != "holdout.jsonl" && !path.starts_with("solutions/")) out.files.emplace(path, sha);
  return out;
}

ManifestDiff manifest_diff(const Manifest& a, const Manifest& b) {
  ManifestDiff d;
  for (const auto& [path, sha] : a.files) {
    auto it = b.files.find(path);
    if (it == b.files.end())
      d.removed.push_back(path);
    else if (it->second != sha)
      d.changed.push_back(path);
  }
  for (const auto& [path, sha] : b.files)
    if (!a.files.contains(path)) d.added.push_back(path);
  return d;
}

Result<Manifest> Manifest::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object())
    return Status::bad_input("manifest: expected an object with \"files\": {path: sha256}");
  Manifest m;
  for (const auto& [path, hash] : j["files"].items()) {
    if (!hash.is_string()) return Status::bad_input("manifest: /files/" + path + ": expected a sha256 string");
    m.files[path] = hash.get<std::string>();
  }
  if (j.contains("digest") && (!j["digest"].is_string() || j["digest"].get<std::string>() != m.digest()))
    return Status::bad_input("manifest: /digest does not match the listed files");
  return m;
}

std::string describe(const ManifestDiff& d) {
  std::string out;
  auto part = [&out](const char* what, const std::vector<std::string>& files) {
    if (files.empty()) return;
    out += (out.empty() ? "" : "; ") + std::string(what) + ": ";
    for (size_t i = 0; i < files.size(); ++i) out += (i ? ", " : "") + files[i];
  };
  part("changed", d.changed);
  part("added", d.added);
  part("removed", d.removed);
  return out;
}

}  // namespace kda::task
