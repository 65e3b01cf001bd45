#include "elf/elf_file.h"

#include <algorithm>
#include <cstdlib>
#include <random>

#include <gtest/gtest.h>

#include "proc/subprocess.h"
#include "util/fs.h"

namespace kda::elf {
namespace {

namespace stdfs = std::filesystem;

// A temporary directory removed when the test program exits.
struct TempDir {
  explicit TempDir(const char* prefix) : path(*fs::make_temp_dir(stdfs::temp_directory_path(), prefix)) {}
  ~TempDir() {
    std::error_code ec;
    stdfs::remove_all(path, ec);
  }
  stdfs::path path;
};

// Compiles `source` (C++) into a shared library with the host compiler; returns its path.
stdfs::path compile_so(const std::string& name, const std::string& source, std::vector<std::string> flags = {}) {
  static const TempDir temp("kda-elf-test");
  const stdfs::path& dir = temp.path;
  stdfs::path src = dir / (name + ".cc");
  stdfs::path so = dir / ("lib" + name + ".so");
  EXPECT_TRUE(fs::write_file_atomic(src, source).ok());
  proc::RunOptions o;
  o.argv = {"c++", "-shared", "-fPIC", "-O1", "-o", so.string(), src.string()};
  o.argv.insert(o.argv.end(), flags.begin(), flags.end());
  auto r = proc::run(o);
  EXPECT_TRUE(r.ok() && r->exit.success()) << (r.ok() ? r->stderr_text : r.status().message());
  return so;
}

TEST(ElfFile, ReadsExportsImportsNeededAndVersions) {
  auto so = compile_so("basic", R"(
#include <cstdio>
#include <cmath>
extern "C" int kda_entry(int x) { std::printf("%d\n", x); return (int)std::sqrt((double)x); }
extern "C" __attribute__((visibility("hidden"))) int kda_hidden(int x) { return x + 1; }
static int kda_local(int x) { return x * 2; }
extern "C" int kda_uses_local(int x) { return kda_local(x); }
)",
                       {"-lm", "-Wl,-z,relro,-z,now"});
  auto info = read_elf_file(so);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_TRUE(info->shared_object);
  EXPECT_TRUE(info->has_dynamic);
  EXPECT_EQ(info->machine, 62);  // x86-64 (the CI machine)
  ASSERT_NE(info->find_export("kda_entry"), nullptr);
  EXPECT_EQ(info->find_export("kda_entry")->type, SymbolType::kFunc);
  EXPECT_NE(info->find_export("kda_uses_local"), nullptr);
  EXPECT_EQ(info->find_export("kda_hidden"), nullptr);
  EXPECT_EQ(info->find_export("kda_local"), nullptr);
  const DynamicSymbol* printf_sym = info->find_import("printf");
  ASSERT_NE(printf_sym, nullptr);
  EXPECT_EQ(printf_sym->version.rfind("GLIBC_", 0), 0u) << printf_sym->version;
  EXPECT_NE(std::find(info->needed.begin(), info->needed.end(), "libc.so.6"), info->needed.end());
  EXPECT_TRUE(info->relro);
  EXPECT_TRUE(info->bind_now);
  EXPECT_FALSE(info->exec_stack);
}

TEST(ElfFile, LazyBindingIsReported) {
  auto so = compile_so("lazy", "extern \"C\" int f(int x) { return x; }\n", {"-Wl,-z,lazy,-z,norelro"});
  auto info = read_elf_file(so);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_FALSE(info->bind_now);
  EXPECT_FALSE(info->relro);
  EXPECT_NE(info->find_export("f"), nullptr);
}

TEST(ElfFile, StaticConstructorsAreCounted) {
  auto so = compile_so("ctor", "static int g = [] { return 42; }();\nextern \"C\" int f() { return g; }\n");
  auto info = read_elf_file(so);
  ASSERT_TRUE(info.ok());
  EXPECT_GE(info->init_functions, 1u);
}

TEST(ElfFile, RejectsNonElf) {
  EXPECT_EQ(parse_elf("").status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(parse_elf("#!/bin/sh\necho hi\n").status().kind(), ErrorKind::kBadInput);
  std::string elf32(64, '\0');
  elf32.replace(0, 5,
                "\x7f"
                "ELF\x01");
  EXPECT_NE(parse_elf(elf32).status().message().find("64-bit"), std::string::npos);
  EXPECT_EQ(read_elf_file("/nonexistent/libx.so").status().kind(), ErrorKind::kNotFound);
}

// The loaded-image digest follows the code and data the loader maps, not the source text or where
// it was compiled: a comment edit and another source directory (which change the symbol table's file
// name and with it the GNU build ID) keep it; a changed constant or optimisation level does not.
TEST(ElfFile, LoadedImageDigestFollowsCodeNotSourceText) {
  const std::string kernel = R"(
extern "C" float kda_scale(float x) { return x * 1.5f; }  // the factor
)";
  const std::string comment = R"(
extern "C" float kda_scale(float x) { return x * 1.5f; }  // Round 12 (a comment only): the factor
)";
  const std::string changed = R"(
extern "C" float kda_scale(float x) { return x * 2.5f; }  // the factor
)";
  auto digest = [](const stdfs::path& so) {
    auto d = loaded_image_digest_file(so);
    EXPECT_TRUE(d.ok()) << d.status().message();
    return d.ok() ? *d : std::string();
  };
  const std::vector<std::string> id = {"-Wl,--build-id=sha1"};
  const std::string a = digest(compile_so("digest_a", kernel, id));
  ASSERT_EQ(a.size(), 64u);
  const auto file_a = fs::read_file(compile_so("digest_a", kernel, id)),
             file_b = fs::read_file(compile_so("digest_b", comment, id));
  ASSERT_TRUE(file_a.ok() && file_b.ok());
  EXPECT_NE(*file_a, *file_b) << "the files differ (build ID, file names), or the test shows nothing";
  EXPECT_EQ(digest(compile_so("digest_b", comment, id)), a);
  // A longer source file name moves the section table (e_shoff), which is not loaded.
  EXPECT_EQ(digest(compile_so("digest_with_a_much_longer_file_name", kernel, id)), a);
  EXPECT_NE(digest(compile_so("digest_c", changed, id)), a);
  EXPECT_NE(digest(compile_so("digest_d", kernel, {"-O0"})), a);
  EXPECT_EQ(loaded_image_digest("#!/bin/sh\n").status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(loaded_image_digest_file("/nonexistent/libx.so").status().kind(), ErrorKind::kNotFound);
}

// Mutated and truncated images must parse or fail cleanly, never crash or hang (run under
// -DKDA_SANITIZE=ON to catch out-of-bounds reads too).
TEST(ElfFile, FuzzedImagesNeverCrash) {
  auto so = compile_so("fuzz", R"(
#include <cstdio>
extern "C" int entry(int x) { std::puts("x"); return x; }
extern "C" int other(int x) { return x * 3; }
)");
  auto bytes = fs::read_file(so);
  ASSERT_TRUE(bytes.ok());
  const std::string& orig = *bytes;
  ASSERT_TRUE(parse_elf(orig).ok());
  std::mt19937_64 rng(12345);
  int parsed = 0, rejected = 0;
  int iterations = 3000;  // KDA_ELF_FUZZ_ITERATIONS raises it for a long run under sanitizers
  if (const char* e = std::getenv("KDA_ELF_FUZZ_ITERATIONS")) iterations = std::max(1, std::atoi(e));
  for (int iter = 0; iter < iterations; ++iter) {
    std::string m = orig;
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      // Bias edits towards the headers and the dynamic metadata at the front of the file.
      size_t limit = (rng() % 2) ? std::min<size_t>(m.size(), 4096) : m.size();
      size_t pos = rng() % limit;
      switch (rng() % 3) {
        case 0: m[pos] = static_cast<char>(rng()); break;
        case 1: m[pos] = static_cast<char>(0xff); break;
        default: {
          uint64_t v = (rng() % 2) ? ~uint64_t{0} : rng();
          for (int k = 0; k < 8 && pos + k < m.size(); ++k) m[pos + k] = static_cast<char>(v >> (8 * k));
        }
      }
    }
    if (rng() % 4 == 0) m.resize(rng() % m.size());
    auto r = parse_elf(m);
    (r.ok() ? parsed : rejected)++;
    (void)loaded_image_digest(m);
  }
  for (size_t len = 0; len < std::min<size_t>(orig.size(), 2048); len += 7) (void)parse_elf(orig.substr(0, len));
  EXPECT_GT(parsed + rejected, 0);
  EXPECT_GT(rejected, 0);  // some mutations must be caught, or the checks are not doing anything
}

}  // namespace
}  // namespace kda::elf
