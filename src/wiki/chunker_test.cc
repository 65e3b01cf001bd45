#include <gtest/gtest.h>

#include "wiki/chunker.h"

namespace kda::wiki {
namespace {

constexpr const char* kCuda = R"cu(#include <cuda.h>
// A comment with a brace {
namespace demo {

template <int N>
struct Params {
  int n;
  const char* s = "}";
};

/// Scales x.
template <typename T>
__global__ void __launch_bounds__(128) scale_kernel(T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { x[i] *= 2; }
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global [%0], [%1];" :: "r"(0), "l"(x));
}

inline int helper(int a) { return a + 1; }

}  // namespace demo

int main() {
  return 0;
}
)cu";

TEST(Chunker, FindsKernelsFunctionsAndTypes) {
  auto chunks = chunk_cpp(kCuda);
  std::vector<std::string> titles;
  for (const auto& c : chunks)
    if (c.unit != "glue") titles.push_back(c.title + "/" + c.unit);
  EXPECT_EQ(titles,
            (std::vector<std::string>{"Params/type", "scale_kernel/kernel", "helper/function", "main/function"}));
  const Chunk* k = nullptr;
  for (const auto& c : chunks)
    if (c.title == "scale_kernel") k = &c;
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->start_line, 11);  // includes the doc comment and the template line
  EXPECT_EQ(k->end_line, 17);
  EXPECT_NE(std::find(k->symbols.begin(), k->symbols.end(), "cp.async.bulk.tensor.2d.shared::cluster.global"),
            k->symbols.end());
  // Everything non-blank is covered exactly once.
  int covered = 0;
  for (const auto& c : chunks) covered += c.end_line - c.start_line + 1;
  EXPECT_LE(covered, 26);
  EXPECT_GE(covered, 20);
}

TEST(Chunker, LargeFunctionsAreWindowed) {
  std::string big = "void big() {\n";
  for (int i = 0; i < 450; ++i) big += "  x += " + std::to_string(i) + ";\n";
  big += "}\n";
  auto chunks = chunk_cpp(big);
  ASSERT_GE(chunks.size(), 3u);
  for (const auto& c : chunks) {
    EXPECT_EQ(c.title, "big");
    EXPECT_LE(c.end_line - c.start_line + 1, kWindowLines);
  }
}

TEST(Chunker, LargeClassesAreSplitIntoMembers) {
  std::string cls = "class Collective : public Base {\n public:\n";
  for (int m = 0; m < 5; ++m) {
    cls += "  void method" + std::to_string(m) + "(int a) {\n";
    for (int i = 0; i < 50; ++i) cls += "    a += " + std::to_string(i) + ";\n";
    cls += "  }\n";
  }
  cls += "};\n";
  auto chunks = chunk_cpp(cls);
  int methods = 0;
  for (const auto& c : chunks)
    if (c.unit == "function") {
      ++methods;
      EXPECT_TRUE(c.title.starts_with("Collective::method")) << c.title;
    }
  EXPECT_EQ(methods, 5);
}

TEST(Chunker, PythonAndMarkdown) {
  auto py =
      chunk_python("import x\n\n@dec\ndef f(a):\n    return a\n\nclass C:\n    def m(self):\n        pass\n\nY = 1\n");
  std::vector<std::string> titles;
  for (const auto& c : py) titles.push_back(c.title);
  EXPECT_EQ(titles, (std::vector<std::string>{"", "f", "C", ""}));
  EXPECT_EQ(py[1].start_line, 3);
  auto md = chunk_markdown("intro\n# A\ntext\n```\n# not a heading\n```\n## B\nmore\n", 5);
  ASSERT_EQ(md.size(), 3u);
  EXPECT_EQ(md[1].title, "A");
  EXPECT_EQ(md[1].start_line, 6);
  EXPECT_EQ(md[2].headings, "A > B");
}

TEST(Chunker, PtxMnemonics) {
  auto m = ptx_mnemonics(
      R"(asm volatile("{\n\t.reg .pred p;\n" "@p mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;" "wgmma.fence.sync.aligned;");)");
  EXPECT_EQ(m, (std::vector<std::string>{"mbarrier.try_wait.parity.shared::cta.b64", "wgmma.fence.sync.aligned"}));
}

}  // namespace
}  // namespace kda::wiki
