#include "agent/backend.h"

namespace kda::agent {

const char* role_name(Role role) { return role == Role::kWriter ? "writer" : "reviewer"; }

Usage& Usage::operator+=(const Usage& o) {
  input_tokens += o.input_tokens;
  output_tokens += o.output_tokens;
  cache_read_tokens += o.cache_read_tokens;
  cache_write_tokens += o.cache_write_tokens;
  cost_usd += o.cost_usd;
  requests += o.requests;
  return *this;
}

}  // namespace kda::agent
