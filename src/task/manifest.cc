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

ManifestDiff manifest_diff(const Manifest& a, const Manifest& b) {
  ManifestDiff d;
  for (const auto& [path, sha] : a.files) {
    auto it = b.files.find(path);
    if (it == b.files.end()) d.removed.push_back(path);
    else if (it->second != sha) d.changed.push_back(path);
  }
  for (const auto& [path, sha] : b.files)
    if (!a.files.contains(path)) d.added.push_back(path);
  return d;
}

}  // namespace kda::task
