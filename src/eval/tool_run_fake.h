// Test helper (no GPU, no Nsight tools needed): writes a fake wrapper tool, a small POSIX shell
// script that records its argv and environment, writes `log_text` to the file named by its
// --log-file option (as ncu and compute-sanitizer do), then execs the program after its options
// (the first argument naming kda-runner), so the real runner starts under it.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kda::eval::testing {

inline std::filesystem::path write_fake_tool(const std::filesystem::path& dir, const std::string& name,
                                             const std::filesystem::path& record, const std::string& log_text) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path script = dir / name;
  const std::filesystem::path log_body = dir / (name + ".logtext");
  std::ofstream(log_body) << log_text;
  std::ofstream f(script);
  f << "#!/bin/sh\n"
       "rec='"
    << record.string()
    << "'\n"
       ": > \"$rec\"\n"
       "for a in \"$@\"; do printf '%s\\n' \"$a\" >> \"$rec\"; done\n"
       "echo '--env--' >> \"$rec\"\n"
       "env >> \"$rec\"\n"
       "log=''\n"
       "while [ $# -gt 0 ]; do\n"
       "  case \"$1\" in\n"
       "    --log-file) log=\"$2\"; shift 2 ;;\n"
       "    */kda-runner) break ;;\n"
       "    *) shift ;;\n"
       "  esac\n"
       "done\n"
       "if [ -n \"$log\" ]; then cat '"
    << log_body.string()
    << "' > \"$log\"; fi\n"
       "exec \"$@\"\n";
  f.close();
  ::chmod(script.c_str(), 0755);
  return script;
}

// The lines the fake recorded before "--env--" (its argv).
inline std::vector<std::string> recorded_argv(const std::filesystem::path& record) {
  std::vector<std::string> out;
  std::ifstream in(record);
  for (std::string line; std::getline(in, line);) {
    if (line == "--env--") break;
    out.push_back(line);
  }
  return out;
}

}  // namespace kda::eval::testing
