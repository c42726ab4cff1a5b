// One OpenAI request from submission to its last byte: the scheduler's events turned
// into a JSON reply or a server-sent-event stream on the request's HttpExchange.
//
// Events arrive on the scheduler's thread, which must not wait: Push() queues them
// and one worker at a time drains the queue (so a request's events stay in order
// without holding a thread while it waits for them). A client that goes away
// (HttpExchange::OnClose) aborts the scheduler's request at once, streaming or not.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/scheduler.h"
#include "server/chat/tool_call_parser.h"
#include "server/chat/tool_call_id.h"
#include "server/chat/tool_call_stream.h"
#include "server/http/http_server.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"
#include "server/request_end.h"
#include "server/security/client_stream_limiter.h"
#include "server/server_metrics.h"

namespace crossreg::server {

struct HttpGenerationContext {
  Scheduler* scheduler = nullptr;
  ServerMetrics* metrics = nullptr;  // may be null
  std::string served_model_name;
  const Tokenizer* tokenizer = nullptr;  // token texts of log-probabilities
  // Runs a task on a worker; false once the HTTP server is gone.
  std::function<bool(std::function<void()>)> post;
};

class HttpGeneration : public std::enable_shared_from_this<HttpGeneration> {
 public:
  struct Identity {
    std::string request_id;
    std::string principal;
    std::string route;
    DecodingMode mode = DecodingMode::kAutoregressive;
    std::vector<int32_t> prompt_ids;
    std::chrono::steady_clock::time_point arrival;
  };

  // `tool_calls`: the model's call format when the chat offers it tools (its text is
  // then read for calls: message.tool_calls, or delta.tool_calls when streaming).
  HttpGeneration(std::shared_ptr<const HttpGenerationContext> context, std::shared_ptr<HttpExchange> exchange,
                 const OpenAiRequest& request, std::optional<chat::ToolCallFormat> tool_calls = std::nullopt);

  // After a successful Submit: sends the stream's head and watches the connection.
  void Start(Identity identity, std::shared_ptr<ClientStreamLimiter::Lease> slot);
  // The scheduler's event handler.
  void Push(const RequestEvent& event);

 private:
  void Drain();
  void Apply(const RequestEvent& event);
  void OnClientGone();
  void Complete(const char* finish_reason, RequestEndReason reason, const absl::Status& error);
  void RespondWhole();
  void EndStream();
  bool SendChunk(const std::string& text, const OpenAiJson& finish_reason, bool first,
                 const std::vector<TokenLogprob>* logprobs = nullptr);
  // A chat chunk of content and tool-call pieces.
  void SendDelta(const chat::StreamDelta& delta, const std::vector<TokenLogprob>* logprobs);
  OpenAiJson WholeMessage() const;
  OpenAiJson LogprobsJson(const std::vector<TokenLogprob>& logprobs, int64_t text_offset) const;
  bool wants_logprobs() const { return request_.proto.sampling().has_top_logprobs(); }
  OpenAiJson Usage() const;
  OpenAiJson Timings() const;  // usage.timings (null before the scheduler finished the request)
  std::string ReplyId() const;
  void RecordEnd(RequestEndReason reason, const absl::Status& error);

  // Shared: a scheduler event may outlive the front door that made this generation.
  const std::shared_ptr<const HttpGenerationContext> context_;
  const std::shared_ptr<HttpExchange> exchange_;
  const OpenAiRequest request_;
  const bool chat_;
  const int64_t created_;
  const std::optional<chat::ToolCallFormat> tool_calls_;
  std::optional<chat::ToolCallStream> tool_stream_;  // streaming with tools
  bool called_tools_ = false;

  std::mutex queue_mu_;
  std::deque<RequestEvent> queue_;
  bool draining_ = false;

  std::mutex mu_;  // the rest; held while an event is applied
  Identity id_;
  std::shared_ptr<ClientStreamLimiter::Lease> slot_;
  std::string whole_text_;  // non-streaming: the reply's text
  std::vector<int32_t> completion_ids_;
  std::vector<TokenLogprob> logprobs_;  // non-streaming, when asked
  int64_t logprob_bytes_ = 0;           // streaming completions: text_offset of the next token
  std::optional<SpeculativeStats> stats_;
  int64_t cached_prompt_tokens_ = 0;  // from the finished event
  uint64_t seed_ = 0;  // from the finished event: the sampling seed, which replays the text
  std::optional<RequestTimings> timings_;
  std::string finish_reason_;
  absl::Status error_;
  bool started_ = false;
  bool done_ = false;
};

}  // namespace crossreg::server
