// Small filesystem helpers: whole-file reads, atomic writes (temp file + rename), data directories.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "util/status.h"

namespace kda::fs {

namespace stdfs = std::filesystem;

// Reads a whole file. Missing file -> kNotFound; other errors -> kIo.
Result<std::string> read_file(const stdfs::path& path);

// Writes via a temporary file in the same directory, fsync, then rename(2):
// readers see the old content or the new, never a half-written file.
Status write_file_atomic(const stdfs::path& path, std::string_view content);

// Creates the directory and its parents; ok if it exists.
Status ensure_dir(const stdfs::path& dir);

// A fresh, empty, private (0700) directory under `parent` named prefix-XXXXXX.
Result<stdfs::path> make_temp_dir(const stdfs::path& parent, std::string_view prefix);

// $XDG_DATA_HOME/kda or ~/.local/share/kda; `override_env` (if set in the environment) wins.
stdfs::path user_data_dir(const char* override_env = nullptr);

// Lexically normal, without a trailing separator ("a/b/../c/" -> "a/c").
stdfs::path lexically_clean(const stdfs::path& p);
// For absolute, clean paths: is `p` equal to `root` or beneath it (component-wise, no I/O)?
bool is_within(const stdfs::path& p, const stdfs::path& root);

// $XDG_CACHE_HOME/kda or ~/.cache/kda; `override_env` (if set in the environment) wins.
stdfs::path user_cache_dir(const char* override_env = nullptr);

}  // namespace kda::fs
