// Bounded, deterministic fuzzing of the safetensors reader: every mutant of a valid file must give either a header
// whose tensors can be read back, or a clean bad_input - never a crash, a hang or another error kind.
// Run it under the sanitizer build too (-DKDA_SANITIZE=ON).
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "tensor/generate.h"
#include "tensor/safetensors.h"
#include "util/fs.h"

namespace kda::tensor {
namespace {

constexpr int kIterations = 40000;
constexpr int kFileEvery = 100;  // every Nth mutant also goes through the file-based API

std::vector<std::string> seed_files() {
  std::vector<std::string> out;
  const Tensor a = generate_random(DType::kFloat32, {3, 4}, 1, 0);
  const Tensor b = generate_random(DType::kFloat4E2M1, {5}, 1, 1);
  const Tensor c = generate_random(DType::kInt64, {}, 1, 2);
  const Tensor d = generate_random(DType::kBFloat16, {0, 3}, 1, 3);
  const Tensor e = generate_random(DType::kFloat8E4M3FN, {2, 2, 2}, 1, 4);
  out.push_back(serialize_safetensors({{"a", &a}, {"b", &b}, {"c", &c}, {"d", &d}, {"e", &e}}, {{"k", "v"}}).value());
  out.push_back(serialize_safetensors({{"weights", &e}}).value());
  out.push_back(serialize_safetensors({}).value());
  return out;
}

void set_le64(std::string& s, uint64_t v) {
  if (s.size() < 8) return;
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

uint64_t get_le64(const std::string& s) {
  uint64_t v = 0;
  for (int i = 7; i >= 0 && s.size() >= 8; --i) v = (v << 8) | static_cast<uint8_t>(s[i]);
  return v;
}

std::string mutate(std::string s, std::mt19937_64& rng) {
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  const int rounds = 1 + static_cast<int>(pick(3));
  for (int r = 0; r < rounds && !s.empty(); ++r) {
    const uint64_t n = get_le64(s);
    const uint64_t header_end = n > s.size() ? s.size() : std::min<uint64_t>(s.size(), 8 + n);
    switch (pick(8)) {
      case 0: {  // bit flips, mostly in the header
        const int flips = 1 + static_cast<int>(pick(8));
        for (int i = 0; i < flips; ++i) {
          const uint64_t pos = pick(2) ? pick(std::max<uint64_t>(header_end, 1)) : pick(s.size());
          if (pos < s.size()) s[pos] = static_cast<char>(s[pos] ^ (1 << pick(8)));
        }
        break;
      }
      case 1:  // truncation
        s.resize(pick(s.size() + 1));
        break;
      case 2: {  // header length lies
        const uint64_t n = get_le64(s);
        const uint64_t lies[] = {0,
                                 1,
                                 n - 1,
                                 n + 1,
                                 n + 8,
                                 s.size(),
                                 s.size() - 8,
                                 ~0ull,
                                 1ull << 63,
                                 kSafetensorsMaxHeaderBytes,
                                 kSafetensorsMaxHeaderBytes + 1,
                                 pick(1ull << 40)};
        set_le64(s, lies[pick(std::size(lies))]);
        break;
      }
      case 3: {  // huge or odd numbers in place of a digit run
        const uint64_t pos = pick(header_end);
        size_t i = s.find_first_of("0123456789", pos);
        if (i == std::string::npos || i >= header_end) break;
        size_t j = i;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        const char* repl[] = {"18446744073709551615",
                              "18446744073709551616",
                              "99999999999999999999999",
                              "-1",
                              "4294967296",
                              "1e3",
                              "0.5",
                              "9223372036854775807",
                              "0",
                              "null",
                              "\"7\"",
                              "[]"};
        s.replace(i, j - i, repl[pick(std::size(repl))]);
        break;
      }
      case 4: {  // JSON punctuation in a random header position
        const char tokens[] = "{}[]\":,-0e\\ \x00\xff";
        const uint64_t pos = pick(header_end);
        if (pos >= 8 && pos < s.size()) s[pos] = tokens[pick(sizeof tokens - 1)];
        break;
      }
      case 5: {  // duplicate a chunk of the header inside it
        const uint64_t a = 8 + pick(header_end > 8 ? header_end - 8 : 1), len = pick(32);
        if (a < s.size()) s.insert(a, s.substr(a, len));
        break;
      }
      case 6: {  // random bytes appended or inserted into the data section
        const std::string junk(static_cast<size_t>(1 + pick(16)), static_cast<char>(pick(256)));
        s.insert(header_end + pick(s.size() - header_end + 1), junk);
        break;
      }
      default: {  // swap dtype names
        const char* names[] = {"F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F4", "I64", "I8", "U8", "BOOL", "F64", "X"};
        const size_t i = s.find("\"dtype\":\"");
        if (i == std::string::npos) break;
        const size_t b = i + 9, e = s.find('"', b);
        if (e == std::string::npos) break;
        s.replace(b, e - b, names[pick(std::size(names))]);
        break;
      }
    }
  }
  return s;
}

// An accepted header must describe tensors whose bytes lie inside the buffer and match their declared size.
void check_accepted(const SafetensorsHeader& h, const std::string& bytes) {
  ASSERT_EQ(h.file_size, bytes.size());
  ASSERT_LE(h.data_offset, bytes.size());
  for (const auto& e : h.tensors) {
    ASSERT_LE(e.begin, e.end);
    ASSERT_LE(h.data_offset + e.end, bytes.size());
    Tensor t(e.dtype, e.shape);
    ASSERT_EQ(static_cast<uint64_t>(t.nbytes()), e.end - e.begin);
    if (t.nbytes() > 0) std::memcpy(t.data(), bytes.data() + h.data_offset + e.begin, static_cast<size_t>(t.nbytes()));
  }
}

TEST(SafetensorsFuzz, MutantsAreAcceptedOrCleanlyRejected) {
  const auto seeds = seed_files();
  auto dir = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-st-fuzz");
  ASSERT_TRUE(dir.ok());
  const auto path = *dir / "m.safetensors";
  std::mt19937_64 rng(20260101);
  int accepted = 0, rejected = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < kIterations; ++it) {
    const std::string m = mutate(seeds[it % seeds.size()], rng);
    const auto t0 = std::chrono::steady_clock::now();
    auto h = parse_safetensors_header(m, m.size(), "fuzz.safetensors");
    if (h.ok()) {
      ++accepted;
      check_accepted(*h, m);
    } else {
      ++rejected;
      ASSERT_EQ(h.status().kind(), ErrorKind::kBadInput) << h.status().message();
      ASSERT_NE(h.status().message().find("fuzz.safetensors"), std::string::npos) << h.status().message();
    }
    if (it % kFileEvery == 0) {
      std::ofstream(path, std::ios::binary | std::ios::trunc).write(m.data(), static_cast<std::streamsize>(m.size()));
      auto fh = read_safetensors_header(path);
      ASSERT_EQ(fh.ok(), h.ok()) << (fh.ok() ? "" : fh.status().message());
      if (fh.ok()) {
        for (const auto& e : fh->tensors) {
          auto t = read_safetensors_tensor(path, e.name);
          ASSERT_TRUE(t.ok()) << t.status().message();
        }
      } else {
        ASSERT_EQ(fh.status().kind(), ErrorKind::kBadInput) << fh.status().message();
      }
    }
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2)) << "iteration " << it << " is too slow";
  }
  std::filesystem::remove_all(*dir);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("safetensors fuzz: %d mutants, %d accepted, %d rejected, %.2f s\n", kIterations, accepted, rejected,
              secs);
  EXPECT_GT(accepted, 0);  // the mutator also produces valid files (e.g. changed tensor bytes)
  EXPECT_GT(rejected, kIterations / 2);
}

}  // namespace
}  // namespace kda::tensor
