// The native source view against ncu's own source-page exports of the same reports.
#include "ncu/native_source.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "ncu/analyze.h"
#include "ncu/csv_pages.h"
#include "ncu/load.h"
#include "ncu/report_reader.h"
#include "ncu/sass_listing.h"
#include "ncu/test_fixtures.h"
#include "util/fs.h"

namespace kda::ncu {
namespace {

namespace stdfs = std::filesystem;
using testing::fixture;

Report native(const std::string& name) {
  auto r = read_ncu_rep(fixture(name));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Report{};
}

Report csv_source(const std::string& name) {
  auto text = fs::read_file(fixture(name));
  EXPECT_TRUE(text.ok());
  auto r = parse_source_page(text.ok() ? *text : "");
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : Report{};
}

std::map<uint64_t, const SourceRow*> by_address(const KernelResult& k) {
  std::map<uint64_t, const SourceRow*> out;
  for (const auto& row : k.source)
    if (row.address != 0) out[row.address] = &row;
  return out;
}

const KernelResult* kernel_named(const Report& r, const std::string& prefix) {
  for (const auto& k : r.kernels)
    if (k.name.starts_with(prefix)) return &k;
  return nullptr;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a);
}

TEST(NativeSource, SmemAddressesAndLinesEqualNcusSourcePage) {
  Report rep = native("multi.ncu-rep");
  Report csv = csv_source("multi_source.csv");
  ASSERT_EQ(csv.kernels.size(), 1u);
  const KernelResult* smem = kernel_named(rep, "smem");
  ASSERT_NE(smem, nullptr);
  EXPECT_EQ(smem->source_note, "");
  auto mine = by_address(*smem), theirs = by_address(csv.kernels[0]);
  ASSERT_EQ(theirs.size(), 40u);
  ASSERT_EQ(mine.size(), theirs.size());  // the whole .text section, at the same absolute PCs
  for (const auto& [pc, row] : theirs) {
    auto it = mine.find(pc);
    ASSERT_NE(it, mine.end()) << std::hex << pc;
    EXPECT_EQ(it->second->line, row->line) << std::hex << pc;
    EXPECT_EQ(it->second->file, "/tmp/w/k.cu");
    EXPECT_TRUE(it->second->cuda.starts_with("__global__ void smem(float*o)")) << it->second->cuda;  // imported source
  }
  EXPECT_EQ(smem->code_bytes, std::optional<uint64_t>(40u * 16));  // the .text section's size, every row of it
  // Both saxpy launches map to their own section at the same load address, line 1.
  for (const auto& k : rep.kernels) {
    if (!k.name.starts_with("saxpy")) continue;
    ASSERT_EQ(k.source.size(), 0x380u / 16);
    EXPECT_EQ(k.code_bytes, std::optional<uint64_t>(0x380));
    for (const auto& row : k.source) EXPECT_EQ(row.line, 1);
  }
  for (const auto& k : csv.kernels) EXPECT_FALSE(k.code_bytes);  // a CSV source page embeds no cubin
}

TEST(NativeSource, SaxpyAddressesEqualNcusSourcePage) {
  Report rep = native("saxpy.ncu-rep");
  Report csv = csv_source("saxpy_source.csv");
  ASSERT_EQ(rep.kernels.size(), 1u);
  auto mine = by_address(rep.kernels[0]), theirs = by_address(csv.kernels[0]);
  ASSERT_EQ(theirs.size(), 32u);
  ASSERT_EQ(mine.size(), theirs.size());
  for (const auto& [pc, row] : theirs) EXPECT_TRUE(mine.count(pc)) << std::hex << pc;
  for (const auto& [pc, row] : mine) EXPECT_GT(row->line, 0) << std::hex << pc;  // -lineinfo build, no imported source
  for (const auto& [pc, row] : mine) EXPECT_EQ(row->cuda, "");
}

TEST(NativeSource, OpcodesFromNvdisasmEqualNcusSourcePage) {
  auto tool = find_nvdisasm();
  if (!tool) GTEST_SKIP() << "nvdisasm (CUDA toolkit) is not on PATH or in /usr/local/cuda/bin";
  for (const auto& [rep_name, csv_name, kernel] : {std::tuple{"multi.ncu-rep", "multi_source.csv", "smem"},
                                                   std::tuple{"saxpy.ncu-rep", "saxpy_source.csv", "saxpy"}}) {
    Report rep = native(rep_name);
    ASSERT_TRUE(attach_sass_text(rep, *tool).ok());
    Report csv = csv_source(csv_name);
    const KernelResult* k = kernel_named(rep, kernel);
    ASSERT_NE(k, nullptr);
    auto mine = by_address(*k);
    size_t compared = 0;
    for (const auto& [pc, row] : by_address(csv.kernels[0])) {
      ASSERT_TRUE(mine.count(pc));
      EXPECT_EQ(sass_opcode(mine[pc]->sass), sass_opcode(row->sass)) << rep_name << " " << std::hex << pc;
      ++compared;
    }
    EXPECT_GT(compared, 30u);
  }
}

// A stand-in nvdisasm: checks its argv (-c and a non-empty cubin file), then prints ncu's own SASS
// text for smem as an nvdisasm listing.
stdfs::path fake_nvdisasm(const stdfs::path& dir, const KernelResult& csv_kernel, uint64_t base) {
  std::string listing = "\t.section\t.text._Z4smemPf,\"ax\",@progbits\n.text._Z4smemPf:\n.L_x_0:\n";
  for (const auto& row : csv_kernel.source) {
    if (row.address == 0) continue;
    char offset[32];
    std::snprintf(offset, sizeof offset, "%04llx", static_cast<unsigned long long>(row.address - base));
    listing += std::string("        /*") + offset + "*/                   " + trim(row.sass) + " ;\n";
    listing += "                                                                 /* 0x000fe40000000800 */\n";
  }
  EXPECT_TRUE(fs::write_file_atomic(dir / "listing.txt", listing).ok());
  const stdfs::path tool = dir / "nvdisasm";
  std::ofstream(tool) << "#!/bin/sh\n[ \"$1\" = \"-c\" ] && [ -s \"$2\" ] || exit 3\nexec cat '"
                      << (dir / "listing.txt").string() << "'\n";
  stdfs::permissions(tool, stdfs::perms::owner_all);
  return tool;
}

TEST(NativeSource, SassTextComesFromNvdisasmPerAddress) {
  auto dir = fs::make_temp_dir(stdfs::temp_directory_path(), "kda-native-source-test");
  ASSERT_TRUE(dir.ok());
  Report csv = csv_source("multi_source.csv");
  Report rep = native("multi.ncu-rep");
  const KernelResult* smem = kernel_named(rep, "smem");
  ASSERT_NE(smem, nullptr);
  const stdfs::path tool = fake_nvdisasm(*dir, csv.kernels[0], smem->source.front().address);
  ASSERT_TRUE(attach_sass_text(rep, tool).ok());
  auto mine = by_address(*smem);
  for (const auto& [pc, row] : by_address(csv.kernels[0])) EXPECT_EQ(mine[pc]->sass, trim(row->sass)) << std::hex << pc;
  EXPECT_EQ(sass_opcode("@!P0 LDG.E.64 R2, desc[UR4][R2.64]"), "LDG.E.64");
  EXPECT_EQ(sass_opcode("  EXIT"), "EXIT");
  // The saxpy kernels are not in the listing: a note, not an error.
  EXPECT_NE(kernel_named(rep, "saxpy")->source_note.find("nvdisasm did not list"), std::string::npos);

  // Through load_report: a missing tool is a note on the kernels; lines stay.
  LoadOptions o;
  o.nvdisasm = *dir / "absent-nvdisasm";
  auto loaded = load_report({stdfs::path(fixture("multi.ncu-rep"))}, o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const KernelResult* k = kernel_named(*loaded, "smem");
  EXPECT_NE(k->source_note.find("no SASS text"), std::string::npos) << k->source_note;
  EXPECT_EQ(k->source.front().line, 2);
  o.nvdisasm = tool;
  loaded = load_report({stdfs::path(fixture("multi.ncu-rep"))}, o);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(kernel_named(*loaded, "smem")->source.front().sass, "LDC R1, c[0x0][0x28]");
  stdfs::remove_all(*dir);
}

TEST(NativeSource, WithoutDebugLineTheNoteSaysBuildWithLineinfo) {
  Report rep = native("multi.ncu-rep");
  ASSERT_EQ(rep.cubins.size(), 1u);
  std::string& image = rep.cubins[0].image;
  for (size_t at = image.find("debug_line"); at != std::string::npos; at = image.find("debug_line", at + 1))
    image[at + 9] = 'x';
  for (auto& k : rep.kernels) k.source.clear();
  attach_native_lines(rep);
  for (const auto& k : rep.kernels) {
    EXPECT_NE(k.source_note.find("build with -lineinfo"), std::string::npos) << k.source_note;
    ASSERT_FALSE(k.source.empty());  // the rows are still there for SASS text
    EXPECT_EQ(k.source.front().line, 0);
  }
  auto a = analyze(rep);
  ASSERT_TRUE(a.ok());
  EXPECT_NE(to_markdown(*a).find("build with -lineinfo"), std::string::npos);
}

TEST(NativeSource, HotPcsOfAnH200ReportGetSourceLines) {
  // softmax_lineinfo.ncu-rep: `kda ncu profile` on the H200 (a -lineinfo build whose source ncu
  // could not import: the file moved after the build), one kernel.
  LoadOptions o;
  o.sass = false;
  auto rep = load_report({stdfs::path(fixture("softmax_lineinfo.ncu-rep"))}, o);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  auto a = analyze(*rep);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->kernels.size(), 1u);
  const auto& k = a->kernels[0];
  ASSERT_FALSE(k.hotspots.empty());
  for (const auto& h : k.hotspots) {
    EXPECT_GT(h.line, 0) << std::hex << h.pc;
    EXPECT_TRUE(h.file.ends_with("/src/kernel.cu")) << h.file;
  }
  EXPECT_EQ(k.pc_base, rep->kernels[0].source.front().address);  // the load address is the lowest executed PC
  const std::string md = to_markdown(*a);
  EXPECT_NE(md.find("| kernel.cu:"), std::string::npos) << md;
}

}  // namespace
}  // namespace kda::ncu
