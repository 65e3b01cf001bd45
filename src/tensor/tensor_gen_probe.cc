// tensor_gen_probe DTYPE NUMEL SEED STREAM: prints the SHA-256 of generate_random(DTYPE, {NUMEL}, SEED, STREAM).
// generate_test runs it in fresh processes to show that generation depends on nothing but its arguments.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tensor/generate.h"
#include "util/sha256.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: tensor_gen_probe DTYPE NUMEL SEED STREAM\n");
    return 2;
  }
  const auto dtype = kda::tensor::dtype_from_name(argv[1]);
  if (!dtype) {
    std::fprintf(stderr, "tensor_gen_probe: unknown dtype '%s'\n", argv[1]);
    return 2;
  }
  const int64_t numel = std::strtoll(argv[2], nullptr, 10);
  const uint64_t seed = std::strtoull(argv[3], nullptr, 0), stream = std::strtoull(argv[4], nullptr, 0);
  const auto t = kda::tensor::generate_random(*dtype, {numel}, seed, stream);
  const auto bytes = t.bytes();
  std::printf("%s\n",
              kda::sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())).c_str());
  return 0;
}
