#include "server/http/http_front_door.h"

#include <httplib.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/http/openai_request.h"
#include "server/request_end.h"
#include "server/security/request_id.h"
#include "server/stop_text_stream.h"
#include "spdlog/spdlog.h"

namespace crossreg::server {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr char kJson[] = "application/json";

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// HTTP status for an absl status, as OpenAI-compatible servers answer.
int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

const char* ErrorType(int http_status) {
  switch (http_status) {
    case 400:
    case 404:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 429:
      return "rate_limit_error";
    default:
      return "server_error";
  }
}

// OpenAI's error shape: {"error": {"message", "type", "param", "code"}}. `param` is
// the field the message starts with ("max_tokens: must be ..."), when it names one.
Json ErrorJson(int http_status, const std::string& message) {
  Json param = nullptr;
  const size_t colon = message.find(": ");
  if (colon != std::string::npos && colon < 48 && message.find(' ') >= colon) param = message.substr(0, colon);
  return Json{{"error", {{"message", message}, {"type", ErrorType(http_status)}, {"param", param}, {"code", nullptr}}}};
}

void SendError(httplib::Response& res, int http_status, const std::string& message) {
  res.status = http_status;
  res.set_content(ErrorJson(http_status, message).dump(-1, ' ', false, Json::error_handler_t::replace), kJson);
}

void SendStatus(httplib::Response& res, const absl::Status& status, OpenAiEndpoint endpoint) {
  SendError(res, HttpStatusOf(status.code()), InJsonTerms(std::string(status.message()), endpoint));
}

// The client certificate's identity (first DNS/URI subject alternative name, else
// the common name), as gRPC reports it; empty without a verified certificate.
std::string CertificateIdentity(const SSL* ssl) {
  if (ssl == nullptr) return "";
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return "";
  std::string identity;
  if (auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr))) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names) && identity.empty(); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
      if (name->type == GEN_DNS || name->type == GEN_URI) {
        const ASN1_STRING* s = name->type == GEN_DNS ? name->d.dNSName : name->d.uniformResourceIdentifier;
        identity.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), ASN1_STRING_length(s));
      }
    }
    GENERAL_NAMES_free(names);
  }
  if (identity.empty()) {
    char cn[256] = {0};
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn)) > 0) identity = cn;
  }
  X509_free(cert);
  return identity;
}

// One generation as the HTTP thread sees it: the scheduler's events arrive in a
// queue (its handler must not block), the HTTP thread turns them into text.
class HttpGeneration {
 public:
  HttpGeneration(const Tokenizer& tokenizer, std::vector<std::string> stops) : text_(tokenizer, std::move(stops)) {}

  void Push(const RequestEvent& event) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(event);
    cv_.notify_one();
  }

  // The next event, or nothing after `timeout`.
  std::optional<RequestEvent> Pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    RequestEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

  // Applies an event; returns the text it adds. Sets done() at the end.
  std::string Apply(const RequestEvent& event) {
    std::string piece;
    switch (event.kind) {
      case RequestEvent::Kind::kTokens: {
        ++token_events_;
        size_t used = 0;
        piece = text_.Push(event.tokens, &used);
        completion_ids_.insert(completion_ids_.end(), event.tokens.begin(), event.tokens.begin() + used);
        if (text_.stopped()) {
          stopped_by_text_ = true;
          Finish("stop", RequestEndReason::kStop);
        }
        break;
      }
      case RequestEvent::Kind::kFinished:
        piece = text_.Finish();
        stats_ = event.stats;
        timings_ = event.timings;
        if (text_.stopped()) {
          Finish("stop", RequestEndReason::kStop);
        } else {
          const RequestEndReason reason = EndReasonOfFinish(event.finish_reason);
          Finish(reason == RequestEndReason::kStop ? "stop" : "length", reason);
        }
        break;
      case RequestEvent::Kind::kError:
        error_ = event.error;
        done_ = true;
        reason_ = EndReasonOfError(event.error);
        break;
    }
    return piece;
  }

  bool done() const { return done_; }
  // Ended here by a stop sequence: the scheduler's request is still live.
  bool stopped_by_text() const { return stopped_by_text_; }
  const absl::Status& error() const { return error_; }
  const std::string& finish_reason() const { return finish_reason_; }
  RequestEndReason end_reason() const { return reason_; }
  const std::vector<int32_t>& completion_ids() const { return completion_ids_; }
  const std::optional<RequestTimings>& timings() const { return timings_; }

  // OpenAI's usage, plus crossreg's speculative statistics.
  Json Usage(int64_t prompt_tokens) const {
    const int64_t completion = static_cast<int64_t>(completion_ids_.size());
    const int64_t forwards = stats_.has_value() ? stats_->forwards : token_events_;
    Json usage{{"prompt_tokens", prompt_tokens},
               {"completion_tokens", completion},
               {"total_tokens", prompt_tokens + completion},
               {"forwards", forwards},
               {"drafted_tokens", stats_.has_value() ? stats_->drafted : 0},
               {"accepted_tokens", stats_.has_value() ? stats_->accepted : 0},
               {"tokens_per_forward", forwards > 0 ? static_cast<double>(completion) / forwards : 0.0}};
    return usage;
  }

 private:
  void Finish(const char* finish_reason, RequestEndReason reason) {
    done_ = true;
    finish_reason_ = finish_reason;
    reason_ = reason;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestEvent> events_;
  // HTTP thread only.
  StopTextStream text_;
  std::vector<int32_t> completion_ids_;
  int64_t token_events_ = 0;
  std::optional<SpeculativeStats> stats_;
  std::optional<RequestTimings> timings_;
  std::string finish_reason_;
  RequestEndReason reason_ = RequestEndReason::kError;
  absl::Status error_;
  bool done_ = false;
  bool stopped_by_text_ = false;
};

}  // namespace

struct HttpFrontDoor::Impl {
  explicit Impl(HttpFrontDoorOptions options) : o(std::move(options)) {}

  // A submitted request and what the reply needs.
  struct Submitted {
    std::shared_ptr<HttpGeneration> generation;
    std::string request_id;
    std::string principal;
    DecodingMode mode = DecodingMode::kAutoregressive;
    std::vector<int32_t> prompt_ids;
    std::shared_ptr<ClientStreamLimiter::Lease> slot;
    Clock::time_point arrival;
    bool end_recorded = false;
  };

  void AddRoutes();
  absl::StatusOr<std::string> Principal(const httplib::Request& req) const;
  // Everything before the first token: checks, the prompt, submission.
  absl::StatusOr<Submitted> Submit(const httplib::Request& req, const OpenAiRequest& request, Clock::time_point arrival);
  void HandleGenerate(const httplib::Request& req, httplib::Response& res, OpenAiEndpoint endpoint);
  void Respond(httplib::Response& res, const OpenAiRequest& request, Submitted s);
  void Stream(httplib::Response& res, const OpenAiRequest& request, Submitted s);
  void Abort(const Submitted& s, const char* why) const {
    o.scheduler->Abort(s.request_id, absl::CancelledError(why), s.principal);
  }
  // Once per request; later calls do nothing.
  void RecordEnd(Submitted& s, const HttpGeneration& g, std::optional<RequestEndReason> override_reason,
                 const absl::Status& error) const;
  Json ModelsJson() const;

  HttpFrontDoorOptions o;
  std::unique_ptr<httplib::Server> http;
  std::thread thread;
};

absl::StatusOr<std::string> HttpFrontDoor::Impl::Principal(const httplib::Request& req) const {
  if (o.tokens != nullptr && o.tokens->enabled()) {
    auto name = o.tokens->Authenticate(req.get_header_value("Authorization"));
    if (!name.ok()) return name.status();
    return absl::StrCat("token:", *name);
  }
  if (const std::string identity = CertificateIdentity(req.ssl); !identity.empty()) {
    return absl::StrCat("cert:", identity);
  }
  return absl::StrCat("peer:", req.remote_addr);
}

absl::StatusOr<HttpFrontDoor::Impl::Submitted> HttpFrontDoor::Impl::Submit(const httplib::Request& req,
                                                                          const OpenAiRequest& request,
                                                                          Clock::time_point arrival) {
  Submitted s;
  s.arrival = arrival;
  auto principal = Principal(req);
  if (!principal.ok()) return principal.status();
  s.principal = *principal;
  if (!request.model.empty() && request.model != o.served_model_name) {
    return absl::NotFoundError(
        absl::StrCat("model: \"", request.model, "\" is not served here (GET /v1/models lists \"", o.served_model_name,
                     "\")"));
  }
  v1::GenerateRequest proto = request.proto;
  if (request.endpoint == OpenAiEndpoint::kChatCompletions) {
    if (o.chat.family == ChatTemplateFamily::kNone) {
      return absl::FailedPreconditionError(
          "messages: this model has no chat template crossreg recognises (Llama 3, Llama 2, Mistral, ChatML); "
          "use /v1/completions with a prompt");
    }
    auto prompt = RenderChat(o.chat, request.messages);
    if (!prompt.ok()) return prompt.status();
    if (o.defaults.max_prompt_bytes > 0 && prompt->size() > o.defaults.max_prompt_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("messages: ", prompt->size(), " bytes, more than the ",
                                                     o.defaults.max_prompt_bytes, " this server accepts"));
    }
    // The template writes BOS and the turn markers as text: parse them as special tokens.
    const std::vector<int32_t> ids =
        o.defaults.tokenizer->Encode(*prompt, /*add_special=*/false, /*parse_special=*/true);
    proto.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
  }
  auto validated = RequestFromProto(proto, o.env, o.defaults);
  if (!validated.ok()) return validated.status();
  auto slot = o.stream_limiter->Acquire(s.principal);
  if (!slot.ok()) return slot.status();
  s.slot = std::move(*slot);

  GenerationRequest spec = std::move(validated->request);
  if (spec.request_id.empty()) spec.request_id = RandomRequestId();
  spec.owner = s.principal;
  s.request_id = spec.request_id;
  s.mode = spec.decoding.mode;
  s.prompt_ids = spec.prompt_ids;
  s.generation = std::make_shared<HttpGeneration>(*o.defaults.tokenizer, std::move(validated->stop_strings));
  std::weak_ptr<HttpGeneration> target = s.generation;
  absl::Status submitted = o.scheduler->Submit(std::move(spec), [target](const RequestEvent& event) {
    if (auto g = target.lock()) g->Push(event);
  });
  if (!submitted.ok()) {
    if (submitted.code() == absl::StatusCode::kFailedPrecondition && o.draining->load()) {
      return absl::UnavailableError("server is shutting down; retry on another replica");
    }
    return submitted;
  }
  return s;
}

void HttpFrontDoor::Impl::RecordEnd(Submitted& s, const HttpGeneration& g,
                                    std::optional<RequestEndReason> override_reason, const absl::Status& error) const {
  if (s.end_recorded) return;
  s.end_recorded = true;
  RequestEnd end;
  end.api = "http";
  end.request_id = s.request_id;
  end.client = s.principal;
  end.mode = s.mode;
  end.reason = override_reason.value_or(g.end_reason());
  end.prompt_tokens = static_cast<int64_t>(s.prompt_ids.size());
  end.completion_tokens = static_cast<int64_t>(g.completion_ids().size());
  end.finish = g.finish_reason();
  end.timings = g.timings();
  end.total_seconds = SecondsSince(s.arrival);
  end.error = error.ok() ? g.error() : error;
  RecordRequestEnd(o.metrics, end);
}

void HttpFrontDoor::Impl::Respond(httplib::Response& res, const OpenAiRequest& request, Submitted s) {
  HttpGeneration& g = *s.generation;
  std::string text;
  while (!g.done()) {
    if (auto event = g.Pop(std::chrono::milliseconds(1000))) text += g.Apply(*event);
  }
  if (g.stopped_by_text()) Abort(s, "ended by a stop sequence");
  RecordEnd(s, g, std::nullopt, absl::OkStatus());
  if (!g.error().ok()) {
    SendStatus(res, g.error(), request.endpoint);
    return;
  }
  const bool chat = request.endpoint == OpenAiEndpoint::kChatCompletions;
  Json choice{{"index", 0}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = g.finish_reason();
  if (request.return_token_ids) choice["token_ids"] = g.completion_ids();
  Json reply{{"id", absl::StrCat(chat ? "chatcmpl-" : "cmpl-", s.request_id)},
             {"object", chat ? "chat.completion" : "text_completion"},
             {"created", UnixNow()},
             {"model", o.served_model_name},
             {"choices", Json::array({choice})},
             {"usage", g.Usage(static_cast<int64_t>(s.prompt_ids.size()))}};
  if (request.return_token_ids) reply["prompt_token_ids"] = s.prompt_ids;
  res.set_content(reply.dump(-1, ' ', false, Json::error_handler_t::replace), kJson);
}

void HttpFrontDoor::Impl::Stream(httplib::Response& res, const OpenAiRequest& request, Submitted s) {
  const bool chat = request.endpoint == OpenAiEndpoint::kChatCompletions;
  auto state = std::make_shared<Submitted>(std::move(s));
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx and friends: do not buffer the stream
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, state, request, chat](size_t /*offset*/, httplib::DataSink& sink) {
        HttpGeneration& g = *state->generation;
        const std::string id = absl::StrCat(chat ? "chatcmpl-" : "cmpl-", state->request_id);
        const int64_t created = UnixNow();
        auto event = [&](const Json& data) {
          const std::string line =
              absl::StrCat("data: ", data.dump(-1, ' ', false, Json::error_handler_t::replace), "\n\n");
          return sink.write(line.data(), line.size());
        };
        auto chunk = [&](const std::string& text, const Json& finish_reason, bool first) {
          Json choice{{"index", 0}};
          if (chat) {
            Json delta = Json::object();
            if (first) delta["role"] = "assistant";
            if (!text.empty() || !first) delta["content"] = text;
            choice["delta"] = delta;
          } else {
            choice["text"] = text;
            choice["logprobs"] = nullptr;
          }
          choice["finish_reason"] = finish_reason;
          Json data{{"id", id},
                    {"object", chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", created},
                    {"model", o.served_model_name},
                    {"choices", Json::array({choice})}};
          if (request.include_usage) data["usage"] = nullptr;
          return event(data);
        };
        // A client that went away shows as a failed write: free its KV at once.
        auto gone = [&] {
          if (!g.done() || g.stopped_by_text()) Abort(*state, "the HTTP client disconnected");
          RecordEnd(*state, g, RequestEndReason::kDisconnected, absl::CancelledError("the HTTP client disconnected"));
          return false;
        };
        if (chat && !chunk("", nullptr, true)) return gone();
        while (!g.done()) {
          std::optional<RequestEvent> e = g.Pop(std::chrono::milliseconds(1000));
          if (!e.has_value()) {
            // Nothing to send for a second: a comment line finds a closed connection.
            if (!sink.write(": keep-alive\n\n", 14)) return gone();
            continue;
          }
          const std::string text = g.Apply(*e);
          if (!text.empty() && !chunk(text, nullptr, false)) return gone();
        }
        if (g.stopped_by_text()) Abort(*state, "ended by a stop sequence");
        RecordEnd(*state, g, std::nullopt, absl::OkStatus());
        if (!g.error().ok()) {
          const int status = HttpStatusOf(g.error().code());
          event(ErrorJson(status, InJsonTerms(std::string(g.error().message()), request.endpoint)));
        } else {
          if (!chunk("", g.finish_reason(), false)) return false;
          if (request.include_usage) {
            Json data{{"id", id},
                      {"object", chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", created},
                      {"model", o.served_model_name},
                      {"choices", Json::array()},
                      {"usage", g.Usage(static_cast<int64_t>(state->prompt_ids.size()))}};
            if (!event(data)) return false;
          }
        }
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        sink.done();
        return true;
      },
      [this, state](bool success) {
        // The response ended before the generation did (the client left before the
        // first write, or the server is stopping): stop generating for it.
        if (!success && !state->generation->done()) {
          Abort(*state, "the HTTP response ended");
          RecordEnd(*state, *state->generation, RequestEndReason::kDisconnected,
                    absl::CancelledError("the HTTP client disconnected"));
        }
        state->slot.reset();
      });
}

void HttpFrontDoor::Impl::HandleGenerate(const httplib::Request& req, httplib::Response& res, OpenAiEndpoint endpoint) {
  const Clock::time_point arrival = Clock::now();
  if (o.draining->load()) {
    SendError(res, 503, "server is shutting down; retry on another replica");
    return;
  }
  // Credentials before the body is even parsed.
  if (o.tokens != nullptr && o.tokens->enabled()) {
    if (auto name = o.tokens->Authenticate(req.get_header_value("Authorization")); !name.ok()) {
      SendError(res, 401, std::string(name.status().message()));
      return;
    }
  }
  auto request = ParseOpenAiRequest(req.body, endpoint);
  if (!request.ok()) {
    SendStatus(res, request.status(), endpoint);
    return;
  }
  auto submitted = Submit(req, *request, arrival);
  if (!submitted.ok()) {
    spdlog::debug("HTTP request refused: {} {}", req.path, submitted.status().ToString());
    SendStatus(res, submitted.status(), endpoint);
    return;
  }
  if (request->stream) {
    Stream(res, *request, std::move(*submitted));
  } else {
    Respond(res, *request, std::move(*submitted));
  }
}

Json HttpFrontDoor::Impl::ModelsJson() const {
  return Json{{"object", "list"},
              {"data",
               Json::array({Json{{"id", o.served_model_name},
                                 {"object", "model"},
                                 {"created", UnixNow()},
                                 {"owned_by", "crossreg"},
                                 {"max_model_len", o.context_length},
                                 {"chat_template", ChatTemplateFamilyName(o.chat.family)},
                                 {"speculative", o.env.has_adapter ? "ar, lossless, lossy, ngram" : "ar, ngram"}}})}};
}

void HttpFrontDoor::Impl::AddRoutes() {
  auto counted = [this](const char* route, auto handler) {
    return [this, route, handler](const httplib::Request& req, httplib::Response& res) {
      handler(req, res);
      // httplib sets 200 after the handler when it left the status unset (-1).
      if (o.metrics != nullptr) o.metrics->OnHttpCall(route, res.status < 0 ? 200 : res.status);
    };
  };
  http->Post("/v1/completions", counted("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
               HandleGenerate(req, res, OpenAiEndpoint::kCompletions);
             }));
  http->Post("/v1/chat/completions",
             counted("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
               HandleGenerate(req, res, OpenAiEndpoint::kChatCompletions);
             }));
  http->Get("/v1/models", counted("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
              if (o.tokens != nullptr && o.tokens->enabled()) {
                if (auto name = o.tokens->Authenticate(req.get_header_value("Authorization")); !name.ok()) {
                  SendError(res, 401, std::string(name.status().message()));
                  return;
                }
              }
              res.set_content(ModelsJson().dump(), kJson);
            }));
  // Open to probes, like gRPC health: 200 while serving, 503 while draining.
  http->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool draining = o.draining->load();
    res.status = draining ? 503 : 200;
    res.set_content(draining ? "draining\n" : "ok\n", "text/plain");
  });
  http->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    SendError(res, res.status,
              res.status == 404 ? absl::StrCat("no such endpoint: ", req.method, " ", req.path,
                                               " (POST /v1/completions, POST /v1/chat/completions, GET /v1/models, "
                                               "GET /health)")
                                : absl::StrCat("HTTP ", res.status));
  });
  http->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    SendError(res, 500, what);
  });
}

HttpFrontDoor::HttpFrontDoor(HttpFrontDoorOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpFrontDoor::~HttpFrontDoor() { Stop(); }

absl::Status HttpFrontDoor::Start() {
  HttpFrontDoorOptions& o = impl_->o;
  if (o.tls.enabled()) {
    // The same checks as gRPC's credentials, for the same clear errors.
    if (auto m = LoadTlsMaterial(o.tls, nullptr); !m.ok()) return m.status();
    auto server = std::make_unique<httplib::SSLServer>(o.tls.cert_file.c_str(), o.tls.key_file.c_str(),
                                                       o.tls.mutual() ? o.tls.client_ca_file.c_str() : nullptr);
    if (!server->is_valid()) return absl::InvalidArgumentError("--http_port: the TLS files could not be loaded");
    impl_->http = std::move(server);
  } else {
    impl_->http = std::make_unique<httplib::Server>();
  }
  httplib::Server& http = *impl_->http;
  const size_t threads = static_cast<size_t>(std::max(1, o.threads));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(o.max_body_bytes);
  http.set_read_timeout(static_cast<time_t>(o.read_timeout_s), 0);
  http.set_write_timeout(30, 0);
  impl_->AddRoutes();
  std::string host = o.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  port_ = o.port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, o.port) ? o.port : -1);
  if (port_ <= 0) return absl::UnavailableError(absl::StrCat("--http_port ", o.port, ": cannot bind ", o.host));
  impl_->thread = std::thread([this] { impl_->http->listen_after_bind(); });
  return absl::OkStatus();
}

void HttpFrontDoor::Stop() {
  if (impl_->http != nullptr) impl_->http->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace crossreg::server
