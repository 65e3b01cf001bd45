#include "tensor/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "util/json_text.h"

namespace kda::tensor {

namespace {

using nlohmann::json;

// The deepest nesting a valid header has is 3 (root / entry / shape); anything much deeper is hostile.
constexpr int kMaxJsonDepth = 32;

uint64_t load_le64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

void store_le64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// A JSON value as a non-negative integer (rejects floats, negatives and booleans).
bool as_unsigned(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

Status entry_error(std::string_view source, const std::string& key, const std::string& what) {
  return Status::bad_input(std::string(source) + ": tensor '" + key + "': " + what);
}

Result<SafetensorsEntry> parse_entry(std::string_view source, const std::string& key, const json& v) {
  if (!v.is_object()) return entry_error(source, key, "entry is not a JSON object");
  SafetensorsEntry e;
  e.name = key;

  const auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) return entry_error(source, key, "missing string field 'dtype'");
  const auto dtype = dtype_from_safetensors(dt->get_ref<const std::string&>());
  if (!dtype) return entry_error(source, key, "unsupported dtype '" + dt->get_ref<const std::string&>() + "'");
  e.dtype = *dtype;

  const auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) return entry_error(source, key, "missing array field 'shape'");
  for (const auto& d : *sh) {
    uint64_t n = 0;
    if (!as_unsigned(d, n) || n > static_cast<uint64_t>(INT64_MAX))
      return entry_error(source, key, "'shape' must hold non-negative integers");
    e.shape.push_back(static_cast<int64_t>(n));
  }
  const auto numel = checked_numel(e.shape);
  if (!numel) return entry_error(source, key, "shape " + shape_string(e.shape) + " is too large");

  const auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !as_unsigned((*off)[0], e.begin) ||
      !as_unsigned((*off)[1], e.end))
    return entry_error(source, key, "'data_offsets' must be [begin, end] with non-negative integers");
  if (e.end < e.begin) return entry_error(source, key, "'data_offsets' end is before begin");
  const auto nbytes = static_cast<uint64_t>(dtype_storage_bytes(e.dtype, *numel));
  if (e.end - e.begin != nbytes)
    return entry_error(source, key,
                       "'data_offsets' span " + std::to_string(e.end - e.begin) + " bytes but " +
                           std::string(safetensors_name(e.dtype)) + " " + shape_string(e.shape) + " needs " +
                           std::to_string(nbytes));
  return e;
}

Status read_exact(int fd, uint64_t offset, char* out, uint64_t size, const std::filesystem::path& path) {
  while (size > 0) {
    const ssize_t n = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io(path.string() + ": read failed: " + std::strerror(errno));
    }
    if (n == 0) return Status::bad_input(path.string() + ": file is shorter than its header says (truncated?)");
    out += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
  return {};
}

// An open file descriptor that closes itself.
class File {
 public:
  explicit File(int fd) : fd_(fd) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

struct OpenedHeader {
  std::unique_ptr<File> file;
  SafetensorsHeader header;
};

Result<OpenedHeader> open_and_read_header(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::not_found(path.string() + ": no such file");
  if (!std::filesystem::is_regular_file(path, ec)) return Status::bad_input(path.string() + ": not a regular file");
  auto file = std::make_unique<File>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file->fd() < 0) return Status::io(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(file->fd(), &st) != 0) return Status::io(path.string() + ": cannot stat: " + std::strerror(errno));
  const auto file_size = static_cast<uint64_t>(st.st_size);

  std::string prefix(8, '\0');
  if (file_size < 8) return Status::bad_input(path.string() + ": too short for a safetensors file");
  KDA_RETURN_IF_ERROR(read_exact(file->fd(), 0, prefix.data(), 8, path));
  const uint64_t n = load_le64(prefix.data());
  // Bound the length before allocating for it; parse_safetensors_header re-checks and words the error.
  if (n <= kSafetensorsMaxHeaderBytes && n <= file_size - 8) {
    prefix.resize(8 + n);
    KDA_RETURN_IF_ERROR(read_exact(file->fd(), 8, prefix.data() + 8, n, path));
  }
  KDA_ASSIGN_OR_RETURN(auto header, parse_safetensors_header(prefix, file_size, path.string()));
  return OpenedHeader{std::move(file), std::move(header)};
}

}  // namespace

Result<SafetensorsHeader> parse_safetensors_header(std::string_view prefix, uint64_t file_size,
                                                   std::string_view source) {
  const std::string src(source);
  if (file_size < 8 || prefix.size() < 8) return Status::bad_input(src + ": too short for a safetensors file");
  const uint64_t n = load_le64(prefix.data());
  if (n > kSafetensorsMaxHeaderBytes)
    return Status::bad_input(src + ": header length " + std::to_string(n) + " exceeds the " +
                             std::to_string(kSafetensorsMaxHeaderBytes) + "-byte limit");
  if (n > file_size - 8)
    return Status::bad_input(src + ": header length " + std::to_string(n) + " exceeds the file size " +
                             std::to_string(file_size));
  if (prefix.size() < 8 + n) return Status::bad_input(src + ": header is truncated");
  const std::string_view text = prefix.substr(8, n);
  if (text.empty() || text.front() != '{') return Status::bad_input(src + ": header does not start with '{'");
  if (util::json_nesting_depth(text) > kMaxJsonDepth)
    return Status::bad_input(src + ": header JSON is nested too deeply");

  json root;
  try {
    root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  } catch (const json::exception& e) {  // defensive: parse should not throw with exceptions disabled
    return Status::bad_input(src + ": header is not valid JSON: " + e.what());
  }
  if (root.is_discarded()) return Status::bad_input(src + ": header is not valid JSON");
  if (!root.is_object()) return Status::bad_input(src + ": header is not a JSON object");

  SafetensorsHeader h;
  h.data_offset = 8 + n;
  h.file_size = file_size;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return Status::bad_input(src + ": '__metadata__' is not a JSON object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) return Status::bad_input(src + ": '__metadata__' value for '" + mk + "' is not a string");
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    KDA_ASSIGN_OR_RETURN(auto entry, parse_entry(src, key, value));
    h.tensors.push_back(std::move(entry));
  }

  // The tensors must tile the data section exactly: sorted by offset, each starts where the previous ended.
  std::stable_sort(h.tensors.begin(), h.tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t data_size = file_size - h.data_offset;
  uint64_t covered = 0;
  for (const auto& e : h.tensors) {
    if (e.begin < covered)
      return entry_error(src, e.name,
                         "data [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                             ") overlaps the previous tensor (ending at " + std::to_string(covered) + ")");
    if (e.begin > covered)
      return entry_error(
          src, e.name,
          "data starts at " + std::to_string(e.begin) + ", leaving a gap after byte " + std::to_string(covered));
    if (e.end > data_size)
      return entry_error(
          src, e.name,
          "data ends at " + std::to_string(e.end) + ", beyond the " + std::to_string(data_size) + "-byte data section");
    covered = e.end;
  }
  if (covered != data_size)
    return Status::bad_input(src + ": the data section has " + std::to_string(data_size) +
                             " bytes but the tensors cover " + std::to_string(covered));
  return h;
}

Result<SafetensorsHeader> read_safetensors_header(const std::filesystem::path& path) {
  KDA_ASSIGN_OR_RETURN(auto opened, open_and_read_header(path));
  return std::move(opened.header);
}

Result<Tensor> read_safetensors_tensor(const std::filesystem::path& path, const std::string& name) {
  KDA_ASSIGN_OR_RETURN(auto opened, open_and_read_header(path));
  const auto& tensors = opened.header.tensors;
  const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const auto& e) { return e.name == name; });
  if (it == tensors.end()) return Status::not_found(path.string() + ": no tensor '" + name + "'");
  Tensor t(it->dtype, it->shape);
  KDA_RETURN_IF_ERROR(read_exact(opened.file->fd(), opened.header.data_offset + it->begin,
                                 reinterpret_cast<char*>(t.data()), it->end - it->begin, path)
                          .with_context("tensor '" + name + "'"));
  return t;
}

Result<std::vector<std::pair<std::string, Tensor>>> read_safetensors(const std::filesystem::path& path) {
  KDA_ASSIGN_OR_RETURN(auto opened, open_and_read_header(path));
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(opened.header.tensors.size());
  for (const auto& e : opened.header.tensors) {
    Tensor t(e.dtype, e.shape);
    KDA_RETURN_IF_ERROR(read_exact(opened.file->fd(), opened.header.data_offset + e.begin,
                                   reinterpret_cast<char*>(t.data()), e.end - e.begin, path)
                            .with_context("tensor '" + e.name + "'"));
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

Result<std::string> serialize_safetensors(const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (t == nullptr) return Status::internal("write_safetensors: tensor '" + name + "' is null");
    if (name == "__metadata__") return Status::bad_input("safetensors: '__metadata__' cannot name a tensor");
    if (!seen.insert(name).second) return Status::bad_input("safetensors: tensor '" + name + "' is listed twice");
    const auto nbytes = static_cast<uint64_t>(t->nbytes());
    header[name] = {{"dtype", std::string(safetensors_name(t->dtype()))},
                    {"shape", t->shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;

  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // invalid UTF-8 in a name or metadata
    return Status::bad_input(std::string("safetensors: cannot encode header: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out(8, '\0');
  store_le64(out.data(), text.size());
  out.reserve(8 + text.size() + offset);
  out += text;
  for (const auto& [name, t] : tensors)
    out.append(reinterpret_cast<const char*>(t->data()), static_cast<size_t>(t->nbytes()));
  return out;
}

Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  auto bytes = serialize_safetensors(tensors, metadata);
  if (!bytes.ok()) return bytes.status().with_context(path.string());
  return fs::write_file_atomic(path, *bytes).with_context("writing safetensors");
}

}  // namespace kda::tensor
