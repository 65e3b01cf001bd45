#include "tensor/safetensors.h"

#include <cstring>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "util/fs.h"

namespace kda::tensor {
namespace {

using ::testing::HasSubstr;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

// A file from a header text and a data section of `data_size` zero bytes (no padding, as another writer might).
std::string make_file(const std::string& header, size_t data_size) {
  return le64(header.size()) + header + std::string(data_size, '\0');
}

Result<SafetensorsHeader> parse(const std::string& file) {
  return parse_safetensors_header(file, file.size(), "x.safetensors");
}

class SafetensorsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = fs::make_temp_dir(std::filesystem::temp_directory_path(), "kda-st-test");
    ASSERT_TRUE(d.ok()) << d.status().message();
    dir_ = *d;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SafetensorsFileTest, RoundTripsEveryDtypeWithMetadata) {
  std::vector<Tensor> ts;
  int k = 0;
  for (DType d : kAllDTypes) {
    Tensor t(d, {3, 5});
    for (int64_t i = 0; i < t.numel(); ++i) t.set_from_double(i, (i * 7 + k) % 11 - 5);
    ts.push_back(std::move(t));
    ++k;
  }
  ts.emplace_back(DType::kFloat4E2M1, std::vector<int64_t>{3});  // odd fp4: 2 bytes
  ts.back().set_from_double(2, -3.0);
  ts.emplace_back(DType::kInt64, std::vector<int64_t>{});  // scalar
  ts.back().set_from_double(0, -42);
  ts.emplace_back(DType::kFloat32, std::vector<int64_t>{0, 4});  // empty
  std::vector<std::pair<std::string, const Tensor*>> list;
  for (size_t i = 0; i < ts.size(); ++i) list.emplace_back("t" + std::to_string(i), &ts[i]);
  const auto path = dir_ / "a.safetensors";
  ASSERT_TRUE(write_safetensors(path, list, {{"format", "pt"}, {"generator", "kda"}}).ok());

  auto h = read_safetensors_header(path);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->data_offset % 8, 0u);
  EXPECT_EQ(h->file_size, std::filesystem::file_size(path));
  EXPECT_EQ(h->metadata.at("generator"), "kda");
  ASSERT_EQ(h->tensors.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(h->tensors[i].name, list[i].first) << "data-section order";
    EXPECT_EQ(h->tensors[i].dtype, ts[i].dtype());
    EXPECT_EQ(h->tensors[i].shape, ts[i].shape());
    auto t = read_safetensors_tensor(path, list[i].first);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_TRUE(t->bitwise_equal(ts[i])) << list[i].first;
  }
  auto all = read_safetensors(path);
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ((*all)[i].first, list[i].first);
    EXPECT_TRUE((*all)[i].second.bitwise_equal(ts[i])) << list[i].first;
  }
  auto missing = read_safetensors_tensor(path, "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("'nope'"));
  EXPECT_EQ(read_safetensors_header(dir_ / "absent.safetensors").status().kind(), ErrorKind::kNotFound);
}

TEST(Safetensors, ExactBytesOfASmallFile) {
  Tensor t(DType::kFloat32, {2});
  t.span<float>()[0] = 1.0f;
  t.span<float>()[1] = -2.0f;
  auto bytes = serialize_safetensors({{"a", &t}});
  ASSERT_TRUE(bytes.ok());
  const std::string json = R"({"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";  // 54 bytes
  const std::string padded = json + std::string(2, ' ');
  std::string data(8, '\0');
  const float v[2] = {1.0f, -2.0f};
  std::memcpy(data.data(), v, 8);
  EXPECT_EQ(*bytes, le64(56) + padded + data);
}

TEST(Safetensors, AcceptsOtherWritersLayouts) {
  // Key order, whitespace and padding differ from ours; tensors listed out of data order.
  const std::string header =
      R"({ "b" : {"shape":[2,2],"dtype":"BF16","data_offsets":[4,12]}, "__metadata__":{"k":"v"},)"
      R"( "a" : {"dtype":"U8","shape":[4],"data_offsets":[0,4], "extra": 1}, "z":{"dtype":"I32","shape":[0],"data_offsets":[12,12]} }   )";
  auto h = parse(make_file(header, 12));
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->tensors.size(), 3u);
  EXPECT_EQ(h->tensors[0].name, "a");
  EXPECT_EQ(h->tensors[1].name, "b");
  EXPECT_EQ(h->tensors[2].name, "z");
  EXPECT_EQ(h->metadata.at("k"), "v");
  EXPECT_EQ(h->data_offset, 8 + header.size());
  // A file with no tensors at all is valid.
  EXPECT_TRUE(parse(make_file("{}", 0)).ok());
}

struct BadCase {
  const char* label;
  std::string file;
  const char* message_part;
};

TEST(Safetensors, RejectsMalformedHeadersNamingFileAndKey) {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const BadCase cases[] = {
      {"short", std::string(5, '\0'), "too short"},
      {"length beyond file", le64(1000) + "{}", "exceeds the file size"},
      {"length beyond cap", le64(kSafetensorsMaxHeaderBytes + 1) + "{}", "limit"},
      {"not json", make_file("{nope", 0), "not valid JSON"},
      {"not an object", make_file("[1,2]", 0), "does not start with '{'"},
      {"deep nesting", make_file("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}", 0),
       "nested too deeply"},
      {"entry not object", make_file(R"({"t":3})", 0), "'t': entry is not"},
      {"unknown dtype", make_file(R"({"t":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8),
       "unsupported dtype 'F64'"},
      {"missing dtype", make_file(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", 4), "'dtype'"},
      {"negative dim", make_file(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "non-negative"},
      {"float dim", make_file(R"({"t":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4), "non-negative"},
      {"huge shape", make_file(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4),
       "too large"},
      {"bits overflow", make_file(R"({"t":{"dtype":"I64","shape":[288230376151711744],"data_offsets":[0,4]}})", 4),
       "too large"},
      {"offsets arity", make_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4), "data_offsets"},
      {"end before begin", make_file(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 4), "before begin"},
      {"size mismatch", make_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "needs 12"},
      {"beyond data", make_file("{" + ok_entry + "}", 4), "beyond the 4-byte data section"},
      {"trailing bytes", make_file("{" + ok_entry + "}", 12), "has 12 bytes but the tensors cover 8"},
      {"gap", make_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "gap"},
      {"overlap",
       make_file(
           R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"u":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8),
       "overlaps"},
      {"huge offsets",
       make_file(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}})", 1),
       "'t'"},
      {"metadata not object", make_file(R"({"__metadata__":[1]})", 0), "'__metadata__' is not"},
      {"metadata value", make_file(R"({"__metadata__":{"a":1}})", 0), "value for 'a' is not a string"},
  };
  for (const auto& c : cases) {
    auto h = parse(c.file);
    ASSERT_FALSE(h.ok()) << c.label;
    EXPECT_EQ(h.status().kind(), ErrorKind::kBadInput) << c.label;
    EXPECT_THAT(h.status().message(), HasSubstr("x.safetensors")) << c.label;
    EXPECT_THAT(h.status().message(), HasSubstr(c.message_part)) << c.label << ": " << h.status().message();
  }
}

TEST_F(SafetensorsFileTest, TruncatedFileIsBadInput) {
  Tensor t(DType::kInt32, {16});
  auto bytes = serialize_safetensors({{"t", &t}});
  ASSERT_TRUE(bytes.ok());
  const auto path = dir_ / "cut.safetensors";
  ASSERT_TRUE(fs::write_file_atomic(path, bytes->substr(0, bytes->size() - 3)).ok());
  auto r = read_safetensors_tensor(path, "t");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
  EXPECT_THAT(r.status().message(), HasSubstr("cut.safetensors"));
}

TEST_F(SafetensorsFileTest, WriterRejectsDuplicateAndReservedNames) {
  Tensor t(DType::kInt8, {1});
  EXPECT_EQ(write_safetensors(dir_ / "d.safetensors", {{"a", &t}, {"a", &t}}).kind(), ErrorKind::kBadInput);
  EXPECT_EQ(write_safetensors(dir_ / "d.safetensors", {{"__metadata__", &t}}).kind(), ErrorKind::kBadInput);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "d.safetensors"));
}

}  // namespace
}  // namespace kda::tensor
