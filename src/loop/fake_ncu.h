// Tests only: a fake ncu for the profile tool's tests (profile_tool_test, workspace_session_test).
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace kda::loop::testing_fixture {

// A fake ncu: appends its argv (one per line, then "--") to `record`, copies `report` to its -o
// argument and a line to its --log-file, then execs the runner command after its options.
inline std::filesystem::path write_fake_ncu(const std::filesystem::path& dir, const std::filesystem::path& record,
                                            const std::filesystem::path& report) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path script = dir / "ncu";
  std::ofstream f(script);
  f << "#!/bin/sh\n"
       "for a in \"$@\"; do printf '%s\\n' \"$a\" >> '"
    << record.string()
    << "'; done\n"
       "echo -- >> '"
    << record.string()
    << "'\n"
       "out=''; log=''\n"
       "while [ $# -gt 0 ]; do\n"
       "  case \"$1\" in\n"
       "    -o) out=\"$2\"; shift 2 ;;\n"
       "    --log-file) log=\"$2\"; shift 2 ;;\n"
       "    */kda-runner) break ;;\n"
       "    *) shift ;;\n"
       "  esac\n"
       "done\n"
       "if [ -n \"$log\" ]; then echo '==PROF== fake ncu' > \"$log\"; fi\n"
       "if [ -n \"$out\" ]; then cp '"
    << report.string()
    << "' \"$out\"; fi\n"
       "exec \"$@\"\n";
  f.close();
  ::chmod(script.c_str(), 0755);
  return script;
}

}  // namespace kda::loop::testing_fixture
