#include "backends/api_backend.h"

#include <algorithm>
#include <functional>
#include <set>

#include "llm/client.h"
#include "llm/price_table.h"

namespace kda::agent {

namespace {

using nlohmann::json;

constexpr size_t kEventTextCap = 2000;  // tool output kept in an event (the model sees it all)

std::string clip(const std::string& s, size_t cap = kEventTextCap) {
  return s.size() <= cap ? s : s.substr(0, cap) + "...[" + std::to_string(s.size() - cap) + " more bytes]";
}

// The session's tools: reviewers get only the read-only ones.
std::vector<ToolSpec> session_tools(const SessionRequest& request) {
  std::vector<ToolSpec> tools;
  if (request.tools == nullptr) return tools;
  for (auto& t : request.tools->tools()) {
    if (request.role == Role::kReviewer && !t.read_only) continue;
    tools.push_back(std::move(t));
  }
  return tools;
}

// Runs one response's tool calls (a name outside `allowed` or unreadable arguments is an error the
// model reads) and returns their results as the next user message.
llm::Message run_tool_calls(const std::vector<const llm::ContentBlock*>& calls, const std::set<std::string>& allowed,
                            const SessionRequest& request, int turn, const std::function<void(AgentEvent)>& emit) {
  llm::Message results{llm::MessageRole::kUser, {}};
  for (const llm::ContentBlock* call : calls) {
    ToolOutcome outcome;
    if (!allowed.count(call->name)) {
      outcome = {"tool '" + call->name + "' is not available in this session", true, {{"error", "unknown_tool"}}};
    } else if (call->input_invalid) {
      outcome = {"the arguments for '" + call->name + "' were not a JSON object; call it again with valid JSON",
                 true,
                 {{"error", "invalid_arguments"}}};
    } else {
      outcome = request.tools->call(call->name, call->input);
    }
    emit({"tool_call",
          !outcome.is_error,
          {{"tool", call->name},
           {"id", call->id},
           {"arguments", call->input},
           {"is_error", outcome.is_error},
           {"output", clip(outcome.text)},
           {"data", outcome.data},
           {"turn", turn}}});
    results.blocks.push_back(llm::ContentBlock::make_tool_result(call->id, outcome.text, outcome.is_error));
  }
  return results;
}

// What a failed attempt that will be retried is, as the session's event.
AgentEvent retry_event(const llm::AttemptInfo& a, int turn) {
  return {"retry",
          false,
          {{"attempt", a.attempt},
           {"http_status", a.http_status},
           {"error", a.error},
           {"will_retry", a.will_retry},
           {"delay_ms", a.delay.count()},
           {"retry_after", a.retry_after},
           {"request_id", a.request_id},
           {"turn", turn}}};
}

class ApiBackend final : public Backend {
 public:
  ApiBackend(llm::ProviderConfig config, std::shared_ptr<llm::HttpTransport> transport, llm::RetryEnv retry_env,
             llm::EnvLookup env)
      : config_(std::move(config)),
        transport_(std::move(transport)),
        retry_env_(std::move(retry_env)),
        env_(std::move(env)) {
    if (!retry_env_.now) retry_env_ = llm::real_retry_env();
  }

  std::string name() const override { return config_.kind == llm::ProviderKind::kAnthropic ? "anthropic" : "openai"; }

  Result<SessionResult> run_session(const SessionRequest& request) override {
    // --- setup: endpoint, prices, client ---
    KDA_ASSIGN_OR_RETURN(llm::Endpoint endpoint, llm::make_endpoint(config_, env_));
    llm::PriceTable prices = llm::PriceTable::defaults();
    if (!config_.price_table_path.empty()) {
      KDA_ASSIGN_OR_RETURN(prices, llm::PriceTable::load(config_.price_table_path));
    }
    if (transport_ == nullptr) return Status::io("native API agent: kda was built without libcurl");
    llm::ClientOptions opts{config_.kind, endpoint, config_.timeouts, config_.retry, std::move(prices)};
    llm::Client client(std::move(opts), transport_, retry_env_);

    SessionResult result;
    auto emit = [&](AgentEvent ev) {
      if (request.on_event) request.on_event(ev);
      result.events.push_back(std::move(ev));
    };

    // --- tools: reviewers get only the read-only ones ---
    const std::vector<ToolSpec> tools = session_tools(request);
    std::set<std::string> allowed;
    for (const auto& t : tools) allowed.insert(t.name);

    llm::Request req;
    req.model = config_.model;
    req.system = request.system_prompt;
    req.tools = tools;
    req.max_tokens = config_.max_tokens;
    req.temperature = config_.temperature;
    req.messages.push_back({llm::MessageRole::kUser, {llm::ContentBlock::make_text(request.prompt)}});

    const auto deadline = retry_env_.now() + request.timeout;
    bool unpriced_reported = false;
    std::string stop = "end_turn";

    // --- the loop: send, run tools, send results ---
    while (true) {
      if (result.turns >= request.max_turns) {
        stop = "max_turns";
        break;
      }
      if (retry_env_.now() >= deadline) {
        result.timed_out = true;
        stop = "timeout";
        break;
      }
      auto on_attempt = [&](const llm::AttemptInfo& a) {
        result.usage.requests += 1;
        if (!a.ok && a.will_retry) emit(retry_event(a, result.turns + 1));  // a final failure is the session's error
      };
      auto resp = client.send(req, on_attempt, deadline);
      if (!resp.ok()) {
        if (retry_env_.now() >= deadline) {
          result.timed_out = true;
          emit({"error", false, {{"error", resp.status().message()}, {"turn", result.turns + 1}, {"timed_out", true}}});
          stop = "timeout";
          break;
        }
        emit({"error", false, {{"error", resp.status().message()}, {"turn", result.turns + 1}}});
        return resp.status().with_context(std::string("native API agent (") + llm::provider_kind_name(config_.kind) +
                                          " " + config_.model + ")");
      }
      ++result.turns;
      agent::Usage u = resp->usage;
      u.requests = 0;  // counted per attempt above
      result.usage += u;
      if (!client.last_cost_known() && !unpriced_reported) {
        unpriced_reported = true;
        emit({"message",
              true,
              {{"note", "no price for model '" + config_.model + "': cost counted as 0"},
               {"unpriced_model", config_.model}}});
      }

      std::string text = llm::response_text(resp->blocks);
      if (!text.empty()) result.final_text = text;
      emit({"message",
            true,
            {{"turn", result.turns},
             {"text", clip(text)},
             {"stop_reason", llm::stop_reason_name(resp->stop_reason)},
             {"request_id", resp->request_id},
             {"usage",
              {{"input_tokens", u.input_tokens},
               {"output_tokens", u.output_tokens},
               {"cache_read_tokens", u.cache_read_tokens},
               {"cache_write_tokens", u.cache_write_tokens},
               {"cost_usd", u.cost_usd}}}}});
      req.messages.push_back({llm::MessageRole::kAssistant, resp->blocks});

      std::vector<const llm::ContentBlock*> calls;
      for (const auto& b : resp->blocks) {
        if (b.type == llm::BlockType::kToolUse) calls.push_back(&b);
      }
      if (calls.empty() || resp->stop_reason == llm::StopReason::kMaxTokens) {
        stop = llm::stop_reason_name(resp->stop_reason);
        if (!calls.empty()) {
          // A response cut by max_tokens may hold half-written calls: none is run.
          emit({"error",
                false,
                {{"error", "response hit max_tokens with tool calls pending; none were run"}, {"turn", result.turns}}});
        }
        break;
      }

      req.messages.push_back(run_tool_calls(calls, allowed, request, result.turns, emit));
    }
    emit({"message",
          stop != "timeout" && stop != "max_turns",
          {{"session_end", stop},
           {"turns", result.turns},
           {"requests", result.usage.requests},
           {"cost_usd", result.usage.cost_usd}}});
    return result;
  }

 private:
  llm::ProviderConfig config_;
  std::shared_ptr<llm::HttpTransport> transport_;
  llm::RetryEnv retry_env_;
  llm::EnvLookup env_;
};

}  // namespace

std::unique_ptr<Backend> make_api_backend(llm::ProviderConfig config) {
  std::shared_ptr<llm::HttpTransport> transport = llm::make_curl_transport();
  return std::make_unique<ApiBackend>(std::move(config), std::move(transport), llm::real_retry_env(),
                                      llm::process_env());
}

std::unique_ptr<Backend> make_api_backend(llm::ProviderConfig config, std::shared_ptr<llm::HttpTransport> transport,
                                          llm::RetryEnv retry_env, llm::EnvLookup env) {
  return std::make_unique<ApiBackend>(std::move(config), std::move(transport), std::move(retry_env), std::move(env));
}

}  // namespace kda::agent
