// Signal names for verdicts and logs ("SIGSEGV", not "11").
#pragma once

#include <string>

namespace kda::proc {

// "SIGSEGV" for 11; real-time signals as "SIGRTMIN+n"; unknown numbers as "signal N".
std::string signal_name(int sig);

}  // namespace kda::proc
