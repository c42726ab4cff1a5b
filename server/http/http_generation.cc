#include "server/http/http_generation.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "scheduler/cancel_cause.h"
#include "server/http/openai_logprobs.h"

namespace crossreg::server {
namespace {

constexpr char kEventStream[] = "text/event-stream";
constexpr char kJson[] = "application/json";

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string SseEvent(const OpenAiJson& data) { return absl::StrCat("data: ", JsonText(data), "\n\n"); }

}  // namespace

HttpGeneration::HttpGeneration(std::shared_ptr<const HttpGenerationContext> context, std::shared_ptr<HttpExchange> exchange,
                               const OpenAiRequest& request, std::optional<chat::ToolCallFormat> tool_calls)
    : context_(std::move(context)),
      exchange_(std::move(exchange)),
      request_(request),
      chat_(request.endpoint == OpenAiEndpoint::kChatCompletions),
      created_(UnixNow()),
      tool_calls_(chat_ ? tool_calls : std::nullopt) {
  if (tool_calls_.has_value() && request_.stream) tool_stream_.emplace(*tool_calls_);
}

void HttpGeneration::Start(Identity identity, std::shared_ptr<ClientStreamLimiter::Lease> slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    id_ = std::move(identity);
    slot_ = std::move(slot);
    if (request_.stream) {
      exchange_->BeginStream(200, kEventStream, {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
      if (context_->metrics != nullptr) context_->metrics->OnHttpCall(id_.route, 200);
      if (chat_) SendChunk("", nullptr, true);
    }
  }
  std::weak_ptr<HttpGeneration> weak = weak_from_this();
  exchange_->OnClose([weak] {
    if (auto self = weak.lock()) self->OnClientGone();
  });
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    started_ = true;
    post = !queue_.empty() && !draining_;
    draining_ = draining_ || post;
  }
  if (post) context_->post([self = shared_from_this()] { self->Drain(); });
}

void HttpGeneration::Push(const RequestEvent& event) {
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_.push_back(event);
    post = started_ && !draining_;
    draining_ = draining_ || post;
  }
  if (post) context_->post([self = shared_from_this()] { self->Drain(); });
}

void HttpGeneration::Drain() {
  for (;;) {
    RequestEvent event;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      if (queue_.empty()) {
        draining_ = false;
        return;
      }
      event = std::move(queue_.front());
      queue_.pop_front();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) Apply(event);
  }
}

void HttpGeneration::Apply(const RequestEvent& event) {
  switch (event.kind) {
    case RequestEvent::Kind::kTokens:
    case RequestEvent::Kind::kFinished: {
      // The scheduler decoded the text and ended the request at a stop string.
      completion_ids_.insert(completion_ids_.end(), event.tokens.begin(), event.tokens.end());
      if (request_.stream) {
        const bool with_logprobs = wants_logprobs() && !event.logprobs.empty();
        if (tool_stream_.has_value()) {
          chat::StreamDelta delta = tool_stream_->Push(event.text);
          if (event.kind == RequestEvent::Kind::kFinished) {
            chat::StreamDelta rest = tool_stream_->Finish();
            delta.content += rest.content;
            for (chat::ToolCallDelta& d : rest.tool_calls) delta.tool_calls.push_back(std::move(d));
          }
          if (!delta.empty() || with_logprobs) SendDelta(delta, with_logprobs ? &event.logprobs : nullptr);
          called_tools_ = tool_stream_->saw_tool_calls();
        } else if (!event.text.empty() || with_logprobs) {
          SendChunk(event.text, nullptr, false, with_logprobs ? &event.logprobs : nullptr);
        }
      } else {
        whole_text_ += event.text;
        if (wants_logprobs()) logprobs_.insert(logprobs_.end(), event.logprobs.begin(), event.logprobs.end());
      }
      if (event.kind == RequestEvent::Kind::kTokens) break;
      stats_ = event.stats;
      timings_ = event.timings;
      cached_prompt_tokens_ = event.cached_prompt_tokens;
      seed_ = event.seed;
      const RequestEndReason reason = EndReasonOfFinish(event.finish_reason);
      if (tool_calls_.has_value() && !request_.stream) {
        called_tools_ = !chat::ParseToolCalls(whole_text_, *tool_calls_).tool_calls.empty();
      }
      // A message that called tools ends with "tool_calls" (the client runs them), unless
      // it was cut short.
      const char* finish = reason != RequestEndReason::kStop ? "length" : called_tools_ ? "tool_calls" : "stop";
      Complete(finish, reason, absl::OkStatus());
      break;
    }
    case RequestEvent::Kind::kError:
      Complete("", EndReasonOfError(event.error), event.error);
      break;
  }
}

void HttpGeneration::OnClientGone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  done_ = true;
  const absl::Status gone = absl::CancelledError("the HTTP client disconnected");
  context_->scheduler->Abort(id_.request_id, gone, id_.principal);
  RecordEnd(RequestEndReason::kDisconnected, gone);
  slot_.reset();
}

void HttpGeneration::Complete(const char* finish_reason, RequestEndReason reason, const absl::Status& error) {
  done_ = true;
  finish_reason_ = finish_reason;
  error_ = error;
  RecordEnd(reason, error);
  if (request_.stream) {
    EndStream();
  } else {
    RespondWhole();
  }
  slot_.reset();  // the principal may open another stream now
}

void HttpGeneration::RespondWhole() {
  int status = 200;
  std::string body;
  if (!error_.ok()) {
    status = HttpStatusOf(error_);
    body = JsonText(ErrorJson(status, InJsonTerms(error_, request_.endpoint)));
  } else {
    OpenAiJson choice{{"index", 0}};
    if (chat_) {
      choice["message"] = WholeMessage();
      choice["logprobs"] = wants_logprobs() ? LogprobsJson(logprobs_, 0) : OpenAiJson(nullptr);
    } else {
      choice["text"] = whole_text_;
      choice["logprobs"] = wants_logprobs() ? LogprobsJson(logprobs_, 0) : OpenAiJson(nullptr);
    }
    choice["finish_reason"] = finish_reason_;
    if (request_.return_token_ids) choice["token_ids"] = completion_ids_;
    OpenAiJson reply{{"id", ReplyId()},
                     {"object", chat_ ? "chat.completion" : "text_completion"},
                     {"created", created_},
                     {"model", context_->served_model_name},
                     {"choices", OpenAiJson::array({choice})},
                     {"usage", Usage()}};
    if (request_.return_token_ids) reply["prompt_token_ids"] = id_.prompt_ids;
    body = JsonText(reply);
  }
  exchange_->Respond(status, kJson, std::move(body));
  if (context_->metrics != nullptr) context_->metrics->OnHttpCall(id_.route, status);
}

void HttpGeneration::EndStream() {
  if (!error_.ok()) {
    const int status = HttpStatusOf(error_);
    exchange_->Write(SseEvent(ErrorJson(status, InJsonTerms(error_, request_.endpoint))));
  } else {
    SendChunk("", finish_reason_, false);
    if (request_.include_usage) {
      OpenAiJson data{{"id", ReplyId()},
                      {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                      {"created", created_},
                      {"model", context_->served_model_name},
                      {"choices", OpenAiJson::array()},
                      {"usage", Usage()}};
      exchange_->Write(SseEvent(data));
    }
  }
  exchange_->Write("data: [DONE]\n\n");
  exchange_->End();
}

OpenAiJson HttpGeneration::LogprobsJson(const std::vector<TokenLogprob>& logprobs, int64_t text_offset) const {
  if (context_->tokenizer == nullptr) return nullptr;
  return chat_ ? ChatLogprobs(logprobs, *context_->tokenizer)
               : CompletionLogprobs(logprobs, *context_->tokenizer, text_offset);
}

bool HttpGeneration::SendChunk(const std::string& text, const OpenAiJson& finish_reason, bool first,
                               const std::vector<TokenLogprob>* logprobs) {
  OpenAiJson choice{{"index", 0}};
  OpenAiJson logprobs_json = nullptr;
  if (logprobs != nullptr) {
    logprobs_json = LogprobsJson(*logprobs, logprob_bytes_);
    for (const TokenLogprob& lp : *logprobs) {
      if (context_->tokenizer != nullptr) {
        logprob_bytes_ += static_cast<int64_t>(context_->tokenizer->TokenBytes(lp.token).size());
      }
    }
  }
  if (chat_) {
    OpenAiJson delta = OpenAiJson::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || !first) delta["content"] = text;
    choice["delta"] = delta;
    if (logprobs != nullptr) choice["logprobs"] = logprobs_json;
  } else {
    choice["text"] = text;
    choice["logprobs"] = logprobs_json;
  }
  choice["finish_reason"] = finish_reason;
  OpenAiJson data{{"id", ReplyId()},
                  {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                  {"created", created_},
                  {"model", context_->served_model_name},
                  {"choices", OpenAiJson::array({choice})}};
  if (request_.include_usage) data["usage"] = nullptr;
  exchange_->Write(SseEvent(data));
  return !exchange_->closed();
}

OpenAiJson HttpGeneration::WholeMessage() const {
  if (!tool_calls_.has_value()) return {{"role", "assistant"}, {"content", whole_text_}};
  const chat::ParsedMessage parsed = chat::ParseToolCalls(whole_text_, *tool_calls_);
  if (parsed.tool_calls.empty()) return {{"role", "assistant"}, {"content", whole_text_}};
  OpenAiJson calls = OpenAiJson::array();
  for (const chat::ParsedToolCall& call : parsed.tool_calls) {
    calls.push_back({{"id", chat::RandomToolCallId()},
                     {"type", "function"},
                     {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  // As OpenAI: no text beside the calls is a null content.
  return {{"role", "assistant"},
          {"content", parsed.content.empty() ? OpenAiJson(nullptr) : OpenAiJson(parsed.content)},
          {"tool_calls", std::move(calls)}};
}

void HttpGeneration::SendDelta(const chat::StreamDelta& delta, const std::vector<TokenLogprob>* logprobs) {
  OpenAiJson body = OpenAiJson::object();
  if (!delta.content.empty()) body["content"] = delta.content;
  if (!delta.tool_calls.empty()) {
    OpenAiJson calls = OpenAiJson::array();
    for (const chat::ToolCallDelta& d : delta.tool_calls) {
      OpenAiJson call{{"index", d.index}};
      OpenAiJson function{{"arguments", d.arguments}};
      if (!d.id.empty()) {
        call["id"] = d.id;
        call["type"] = "function";
        function = {{"name", d.name}, {"arguments", d.arguments}};
      }
      call["function"] = std::move(function);
      calls.push_back(std::move(call));
    }
    body["tool_calls"] = std::move(calls);
  }
  OpenAiJson choice{{"index", 0}, {"delta", std::move(body)}};
  if (logprobs != nullptr) {
    choice["logprobs"] = LogprobsJson(*logprobs, logprob_bytes_);
  }
  choice["finish_reason"] = nullptr;
  OpenAiJson data{{"id", ReplyId()},
                  {"object", "chat.completion.chunk"},
                  {"created", created_},
                  {"model", context_->served_model_name},
                  {"choices", OpenAiJson::array({choice})}};
  if (request_.include_usage) data["usage"] = nullptr;
  exchange_->Write(SseEvent(data));
}

// OpenAI's usage, plus crossreg's speculative statistics and the seed that replays the text.
OpenAiJson HttpGeneration::Usage() const {
  const auto prompt = static_cast<int64_t>(id_.prompt_ids.size());
  const auto completion = static_cast<int64_t>(completion_ids_.size());
  const int64_t forwards = stats_.has_value() ? stats_->forwards : 0;
  return OpenAiJson{{"prompt_tokens", prompt},
                    {"completion_tokens", completion},
                    {"total_tokens", prompt + completion},
                    {"prompt_tokens_details", {{"cached_tokens", cached_prompt_tokens_}}},
                    {"forwards", forwards},
                    {"drafted_tokens", stats_.has_value() ? stats_->drafted : 0},
                    {"accepted_tokens", stats_.has_value() ? stats_->accepted : 0},
                    {"tokens_per_forward", stats_.has_value() ? stats_->tokens_per_forward() : 0.0},
                    {"seed", seed_},
                    {"timings", Timings()}};
}

// The scheduler's timings, seconds from arrival at the scheduler (gRPC's Complete.timings):
// a request's decode time is total_seconds - time_to_first_token_seconds.
OpenAiJson HttpGeneration::Timings() const {
  if (!timings_.has_value()) return nullptr;
  return OpenAiJson{{"queue_seconds", timings_->queue_seconds},
                    {"time_to_first_token_seconds", timings_->time_to_first_token},
                    {"total_seconds", timings_->total_seconds}};
}

std::string HttpGeneration::ReplyId() const { return absl::StrCat(chat_ ? "chatcmpl-" : "cmpl-", id_.request_id); }

void HttpGeneration::RecordEnd(RequestEndReason reason, const absl::Status& error) {
  RequestEnd end;
  end.api = "http";
  end.request_id = id_.request_id;
  end.client = id_.principal;
  end.mode = id_.mode;
  end.reason = reason;
  end.prompt_tokens = static_cast<int64_t>(id_.prompt_ids.size());
  end.cached_prompt_tokens = cached_prompt_tokens_;
  end.completion_tokens = static_cast<int64_t>(completion_ids_.size());
  end.finish = finish_reason_;
  end.timings = timings_;
  end.total_seconds = SecondsSince(id_.arrival);
  end.error = error;
  RecordRequestEnd(context_->metrics, end);
}

}  // namespace crossreg::server
