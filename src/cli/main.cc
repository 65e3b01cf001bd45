// kda entry point: the only place that turns results into a process exit code.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  kda::cli::Io io{std::cout, std::cerr};
  try {
    int rc = kda::cli::dispatch(args, io);
    std::cout.flush();
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "kda: internal error: " << e.what() << "\n";
    return kda::cli::kExitInternal;
  }
}
