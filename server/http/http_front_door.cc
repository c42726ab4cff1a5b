#include "server/admission.h"
#include "server/http/http_front_door.h"

#include <chrono>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "server/http/http_generation.h"
#include "server/http/http_server.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"
#include "server/http/tool_call_grammar.h"
#include "server/request_limits.h"
#include "server/security/request_id.h"
#include "spdlog/spdlog.h"

namespace crossreg::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kJson[] = "application/json";
// The client's deadline for a generation, in seconds (decimal), like gRPC's timeout.
constexpr char kTimeoutHeader[] = "x-request-timeout";
constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600;

absl::StatusOr<std::optional<Clock::time_point>> Deadline(const HttpRequest& request, Clock::time_point arrival) {
  const std::string_view value = request.Header(kTimeoutHeader);
  if (value.empty()) return std::nullopt;
  const std::string text(value);
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(seconds) || seconds <= 0 || seconds > kMaxTimeoutSeconds) {
    return FieldViolation("X-Request-Timeout",
                          absl::StrCat("must be a number of seconds in (0, ", kMaxTimeoutSeconds, "], got \"", text, "\""));
  }
  return arrival + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

struct HttpFrontDoor::Impl {
  explicit Impl(HttpFrontDoorOptions options) : o(std::move(options)) {}

  void Handle(const std::shared_ptr<HttpExchange>& exchange);
  void HandleGenerate(const std::shared_ptr<HttpExchange>& exchange, OpenAiEndpoint endpoint, const char* route);
  // Everything between the parsed body and the first event: checks, the prompt, submission.
  absl::Status Submit(const std::shared_ptr<HttpExchange>& exchange, const OpenAiRequest& request,
                      const char* route, Clock::time_point arrival);
  absl::StatusOr<std::string> Principal(const HttpExchange& exchange) const;
  absl::Status CheckToken(const HttpExchange& exchange) const;
  absl::StatusOr<v1::GenerateRequest> ChatPrompt(const OpenAiRequest& request) const;
  void Reply(HttpExchange& exchange, const char* route, int status, const std::string& message) const;
  void Reply(HttpExchange& exchange, const char* route, const absl::Status& error) const;
  OpenAiJson ModelsJson() const;

  HttpFrontDoorOptions o;
  std::shared_ptr<HttpGenerationContext> generation_context = std::make_shared<HttpGenerationContext>();
  std::shared_ptr<HttpServer> server;
};

void HttpFrontDoor::Impl::Reply(HttpExchange& exchange, const char* route, int status,
                                const std::string& message) const {
  exchange.Respond(status, kJson, JsonText(ErrorJson(status, message)));
  if (o.metrics != nullptr && route != nullptr) o.metrics->OnHttpCall(route, status);
}

void HttpFrontDoor::Impl::Reply(HttpExchange& exchange, const char* route, const absl::Status& error) const {
  const int status = HttpStatusOf(error);
  exchange.Respond(status, kJson, JsonText(ErrorJson(status, error)));
  if (o.metrics != nullptr && route != nullptr) o.metrics->OnHttpCall(route, status);
}

absl::Status HttpFrontDoor::Impl::CheckToken(const HttpExchange& exchange) const {
  if (o.tokens == nullptr || !o.tokens->enabled()) return absl::OkStatus();
  return o.tokens->Authenticate(std::string(exchange.request().Header("authorization"))).status();
}

absl::StatusOr<std::string> HttpFrontDoor::Impl::Principal(const HttpExchange& exchange) const {
  if (o.tokens != nullptr && o.tokens->enabled()) {
    auto name = o.tokens->Authenticate(std::string(exchange.request().Header("authorization")));
    if (!name.ok()) return name.status();
    return absl::StrCat("token:", *name);
  }
  if (!exchange.peer_identity().empty()) return absl::StrCat("cert:", exchange.peer_identity());
  return absl::StrCat("peer:", exchange.peer_address());
}

void HttpFrontDoor::Impl::Handle(const std::shared_ptr<HttpExchange>& exchange) {
  const HttpRequest& req = exchange->request();
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  if (post && req.path == "/v1/completions") {
    HandleGenerate(exchange, OpenAiEndpoint::kCompletions, "/v1/completions");
  } else if (post && req.path == "/v1/chat/completions") {
    HandleGenerate(exchange, OpenAiEndpoint::kChatCompletions, "/v1/chat/completions");
  } else if (get && req.path == "/v1/models") {
    if (absl::Status token = CheckToken(*exchange); !token.ok()) {
      Reply(*exchange, "/v1/models", 401, std::string(token.message()));
      return;
    }
    exchange->Respond(200, kJson, JsonText(ModelsJson()));
    if (o.metrics != nullptr) o.metrics->OnHttpCall("/v1/models", 200);
  } else if (get && req.path == "/health") {
    // Open to probes, like gRPC health: 200 while serving, 503 while draining.
    const bool draining = o.draining->load();
    exchange->Respond(draining ? 503 : 200, "text/plain", draining ? "draining\n" : "ok\n");
  } else {
    Reply(*exchange, nullptr, 404,
          absl::StrCat("no such endpoint: ", req.method, " ", req.path,
                       " (POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health)"));
  }
}

void HttpFrontDoor::Impl::HandleGenerate(const std::shared_ptr<HttpExchange>& exchange, OpenAiEndpoint endpoint,
                                         const char* route) {
  const Clock::time_point arrival = Clock::now();
  if (o.draining->load()) {
    Reply(*exchange, route, 503, "server is shutting down; retry on another replica");
    return;
  }
  // Credentials before the body is even parsed.
  if (absl::Status token = CheckToken(*exchange); !token.ok()) {
    Reply(*exchange, route, 401, std::string(token.message()));
    return;
  }
  OpenAiParseOptions parse_options;
  parse_options.ignore_unknown_fields = o.ignore_unknown_fields;
  auto request = ParseOpenAiRequest(exchange->request().body, endpoint, parse_options);
  absl::Status status = request.ok() ? Submit(exchange, *request, route, arrival) : request.status();
  if (!status.ok() && request.ok() && request->chat.calls_tools()) {
    // A forced call's grammar is made from the tools: its errors are theirs.
    status = RenameField(status, {{"structured_output.grammar", "tools"}});
  }
  if (!status.ok()) {
    spdlog::debug("HTTP request refused: {} {}", exchange->request().path, status.ToString());
    Reply(*exchange, route, InJsonTerms(status, endpoint));
  }
}

absl::StatusOr<v1::GenerateRequest> HttpFrontDoor::Impl::ChatPrompt(const OpenAiRequest& request) const {
  v1::GenerateRequest proto = request.proto;
  if (o.chat == nullptr) return FieldError(absl::StatusCode::kFailedPrecondition, "messages", o.chat_refusal);
  const ChatRequest& chat = request.chat;
  // A forced call is generated under a grammar of the call format and the tools'
  // parameters; it cannot also follow another constraint.
  const bool forced = chat.tool_choice.kind == ToolChoice::Kind::kRequired ||
                      chat.tool_choice.kind == ToolChoice::Kind::kFunction;
  if (forced) {
    if (proto.has_structured_output()) {
      return FieldViolation("tool_choice", "a forced tool call cannot be combined with response_format, grammar or regex");
    }
    auto grammar = ToolCallGrammar(chat, o.chat->tool_call_format());
    if (!grammar.ok()) return grammar.status();
    if (grammar->size() > kMaxConstraintBytes) {
      return FieldViolation("tools", absl::StrCat("the tools' parameters make a grammar of ", grammar->size(),
                                                  " bytes, more than the ", kMaxConstraintBytes, " allowed"));
    }
    proto.mutable_structured_output()->set_grammar(*std::move(grammar));
  }
  auto prompt = o.chat->Render(chat.messages, chat.calls_tools() ? chat.tools : nlohmann::ordered_json(nullptr));
  if (!prompt.ok()) return FieldViolation("messages", prompt.status().message());
  if (o.defaults.max_prompt_bytes > 0 && prompt->size() > o.defaults.max_prompt_bytes) {
    return FieldViolation("messages", absl::StrCat(prompt->size(), " bytes, more than the ",
                                                   o.defaults.max_prompt_bytes, " this server accepts"));
  }
  // The template writes BOS and the turn markers as text: parse them as special tokens.
  const std::vector<int32_t> ids = o.defaults.tokenizer->Encode(*prompt, /*add_special=*/false, /*parse_special=*/true);
  proto.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
  return proto;
}

absl::Status HttpFrontDoor::Impl::Submit(const std::shared_ptr<HttpExchange>& exchange, const OpenAiRequest& request,
                                         const char* route, Clock::time_point arrival) {
  auto principal = Principal(*exchange);
  if (!principal.ok()) return principal.status();
  if (!request.model.empty() && request.model != o.served_model_name) {
    return absl::NotFoundError(absl::StrCat("model: \"", request.model, "\" is not served here (GET /v1/models lists \"",
                                            o.served_model_name, "\")"));
  }
  auto deadline = Deadline(exchange->request(), arrival);
  if (!deadline.ok()) return deadline.status();
  const AdmissionContext admission{.scheduler = o.scheduler,
                                   .env = &o.env,
                                   .defaults = &o.defaults,
                                   .stream_limiter = o.stream_limiter,
                                   .draining = o.draining};
  auto admitted = Admit(admission, *principal, *deadline, [&]() -> absl::StatusOr<v1::GenerateRequest> {
    return request.endpoint == OpenAiEndpoint::kChatCompletions ? ChatPrompt(request) : request.proto;
  });
  if (!admitted.ok()) return admitted.status();
  GenerationRequest spec = std::move(admitted->request);
  HttpGeneration::Identity id;
  id.request_id = spec.request_id;
  id.principal = *principal;
  id.route = route;
  id.mode = spec.decoding.mode;
  id.prompt_ids = spec.prompt_ids;
  id.arrival = arrival;
  std::optional<chat::ToolCallFormat> tool_calls;
  if (request.endpoint == OpenAiEndpoint::kChatCompletions && request.chat.calls_tools() && o.chat != nullptr) {
    tool_calls = o.chat->tool_call_format();
  }
  auto generation = std::make_shared<HttpGeneration>(generation_context, exchange, request, tool_calls);
  // The scheduler's handler owns the generation: it lives until the request's last
  // event, whoever ends it.
  absl::Status submitted =
      SubmitAdmitted(admission, std::move(spec), [generation](const RequestEvent& event) { generation->Push(event); });
  if (!submitted.ok()) return submitted;
  generation->Start(std::move(id), std::shared_ptr<ClientStreamLimiter::Lease>(std::move(admitted->stream_slot)));
  return absl::OkStatus();
}

OpenAiJson HttpFrontDoor::Impl::ModelsJson() const {
  return OpenAiJson{
      {"object", "list"},
      {"data", OpenAiJson::array({OpenAiJson{{"id", o.served_model_name},
                                             {"object", "model"},
                                             {"created", UnixNow()},
                                             {"owned_by", "crossreg"},
                                             {"max_model_len", o.context_length},
                                             {"chat_template", o.chat != nullptr ? o.chat->Describe() : "none"},
                                             {"speculative", o.env.has_adapter ? "ar, lossless, lossy, ngram"
                                                                               : "ar, ngram"}}})}};
}

HttpFrontDoor::HttpFrontDoor(HttpFrontDoorOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpFrontDoor::~HttpFrontDoor() { Stop(); }

absl::Status HttpFrontDoor::Start() {
  HttpFrontDoorOptions& o = impl_->o;
  HttpServerOptions s;
  s.name = absl::StrCat("--http_port ", o.port);
  s.host = o.host;
  s.port = o.port;
  s.tls = o.tls;
  s.workers = o.workers;
  s.limits.max_body_bytes = o.max_body_bytes;
  s.header_timeout_s = o.header_timeout_s;
  s.body_timeout_s = o.body_timeout_s;
  s.max_connections = o.max_connections;
  s.max_connections_per_client = o.max_connections_per_client;
  if (o.metrics != nullptr) {
    ServerMetrics* metrics = o.metrics;
    s.on_refused = [metrics](const char* limit) { metrics->OnHttpConnectionRefused(limit); };
  }
  s.error_body = [](int status, const std::string& message) {
    return std::make_pair(std::string(kJson), JsonText(ErrorJson(status, message)));
  };
  Impl* impl = impl_.get();
  impl->server = std::make_shared<HttpServer>(std::move(s), [impl](std::shared_ptr<HttpExchange> exchange) {
    impl->Handle(exchange);
  });
  HttpGenerationContext& g = *impl->generation_context;
  g.scheduler = o.scheduler;
  g.metrics = o.metrics;
  g.served_model_name = o.served_model_name;
  g.tokenizer = o.defaults.tokenizer;
  g.post = [server = std::weak_ptr<HttpServer>(impl->server)](std::function<void()> task) {
    auto alive = server.lock();
    return alive != nullptr && alive->Post(std::move(task));
  };
  return impl->server->Start();
}

void HttpFrontDoor::Stop() {
  if (impl_->server != nullptr) impl_->server->Stop();
}

std::string HttpFrontDoor::ChatDescription() const {
  return impl_->o.chat != nullptr ? impl_->o.chat->Describe() : "none";
}

int HttpFrontDoor::port() const { return impl_->server != nullptr ? impl_->server->port() : 0; }

}  // namespace crossreg::server
