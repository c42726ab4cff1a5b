// crossreg-server: opens an engine (model, optional Cross-Regression adapter, CPU or
// CUDA backend: engine/runtime/open_engine.h), runs the continuous-batching scheduler
// on it and serves crossreg.v1.Generation, grpc.health.v1.Health and server
// reflection over gRPC (plaintext, TLS or mutual TLS; bearer tokens optional:
// docs/security.md), with Prometheus metrics on their own port. SIGTERM/SIGINT drain
// and exit 0.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <optional>
#include <string>

#include <pthread.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/large_buffer.h"
#include "engine/decoding/decoding_config.h"
#include "engine/runtime/open_engine.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "scheduler/scheduler.h"
#include "server/generation_service.h"
#include "server/http/http_front_door.h"
#include "server/prometheus_metrics.h"
#include "server/library_logs.h"
#include "server/log_format.h"
#include "server/reflection_service.h"
#include "server/security/server_credentials.h"
#include "server/security/token_file.h"
#include "server/server_options.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace crossreg::server {
namespace {

constexpr char kServiceName[] = "crossreg.v1.Generation";
constexpr char kHealthServiceName[] = "grpc.health.v1.Health";
constexpr char kReflectionServiceName[] = "grpc.reflection.v1alpha.ServerReflection";

// How many rows the forward cost curve measures at start-up. With --adaptive_gamma a
// request may pick any γ' up to --max_gamma while other sequences share its forward, so
// the curve covers the widest such forward, up to this many rows (extended linearly
// past them, draft_length_policy.h).
constexpr int kAdaptiveCurveMaxRows = 128;
// Without it the curve only anchors the speedup metrics' cost model (docs/metrics.md):
// up to a default-gamma speculative forward.
constexpr int kAccountingCurveMaxRows = 32;
// After the scheduler drained, every Generate call has its final event; its last
// writes get this long before the gRPC server stops.
constexpr auto kGrpcLastWritesGrace = std::chrono::seconds(5);

int Milliseconds(double seconds) { return static_cast<int>(seconds * 1000); }

// Connection management: keepalive both ways, and an optional maximum age.
void SetConnectionOptions(const ServerOptions& options, grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
  if (options.keepalive_time_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(options.keepalive_time_s));
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Milliseconds(options.keepalive_timeout_s));
  }
  // Clients that keep idle connections warm with pings are welcome, up to this rate.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             Milliseconds(options.min_client_ping_interval_s));
  if (options.max_connection_age_s > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, Milliseconds(options.max_connection_age_s));
    // Streams in flight when the age is reached get this long to finish.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, Milliseconds(options.drain_timeout_s));
  }
}

// Logs go to stderr (see main), so one critical line is the whole report.
int Fail(const absl::Status& status) {
  spdlog::critical("{}", std::string(status.message()));
  return 1;
}

void SetHealth(grpc::Server& server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  health->SetServingStatus(kServiceName, serving);
}

TlsFiles TlsFilesOf(const ServerOptions& options) {
  return {options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file};
}

// Credentials and tokens before the model: a typo in a path should not wait for a load.
struct Security {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  TokenAuthenticator tokens;
};

absl::StatusOr<Security> LoadSecurity(const ServerOptions& options) {
  Security security;
  std::vector<std::string> tls_warnings;
  auto credentials = MakeServerCredentials(TlsFilesOf(options), &tls_warnings);
  if (!credentials.ok()) return credentials.status();
  security.credentials = std::move(*credentials);
  for (const std::string& w : tls_warnings) spdlog::warn("{}", w);
  if (!options.auth_token_file.empty()) {
    auto loaded = LoadTokenFile(options.auth_token_file);
    if (!loaded.ok()) return loaded.status();
    security.tokens = TokenAuthenticator(std::move(*loaded));
  }
  if (security.tokens.enabled() && options.tls_cert_file.empty()) {
    spdlog::warn("bearer tokens over plaintext can be read by anyone on the network path; serve TLS "
                 "(--tls_cert_file) unless a mesh encrypts the traffic");
  }
  return security;
}

EngineOptions EngineOptionsFor(const ServerOptions& options) {
  EngineOptions e;
  e.model_path = options.model;
  e.adapter_path = options.adapter;
  e.ngram_table_path = options.ngram_table;
  e.backend = options.backend;
  e.cpu_threads = options.threads;
  e.cuda_device = options.cuda_device;
  e.kv_block_size = options.kv_block_size;
  e.kv_dtype = options.kv_dtype;
  e.prefix_caching = options.prefix_caching;
  e.quantize = options.quantize;
  e.device_weights = options.device_weights;
  e.kv_blocks = options.kv_blocks;
  e.kv_memory_bytes = options.kv_memory_mb << 20;
  DecodingConfig widest;
  widest.mode = DecodingMode::kLossless;
  if (options.adaptive_gamma) {
    widest.gamma = options.max_gamma;
    e.cost_curve_rows = std::min({MaxDecodeRows(widest) + std::max(0, options.max_running - 1),
                                  kAdaptiveCurveMaxRows, options.max_batch_tokens});
  } else if (options.metrics_port > 0) {
    widest.gamma = options.default_gamma;
    e.cost_curve_rows = std::min({MaxDecodeRows(widest), kAccountingCurveMaxRows, options.max_batch_tokens});
  }
  return e;
}

void LogEngine(const ServerOptions& options, const Engine& engine) {
  if (!engine.quantize_summary.empty()) spdlog::info("--quantize: {}", engine.quantize_summary);
  if (engine.adapter != nullptr) {
    for (const std::string& w : engine.adapter->warnings) spdlog::warn("adapter {}: {}", engine.adapter_path, w);
  }
  if (engine.cost_curve.has_value()) {
    spdlog::info("forward cost curve ({}): {}",
                 options.adaptive_gamma ? "adaptive gamma, speedup metrics" : "speedup metrics",
                 engine.CostCurveDescription());
  }
}

// Prometheus metrics on --metrics_port (null when 0); GET /ready follows `serving`.
absl::StatusOr<std::unique_ptr<PrometheusMetrics>> StartMetrics(const ServerOptions& options, const Engine& engine,
                                                                 const std::atomic<bool>& serving) {
  if (options.metrics_port <= 0) return nullptr;
  ModelInfoLabels info;
  info.model_name = std::filesystem::path(engine.model_path).filename().string();
  info.backend = std::string(engine.backend->name());
  info.device = engine.backend->device();
  info.adapter =
      engine.adapter_path.empty() ? "none" : std::filesystem::path(engine.adapter_path).filename().string();
  auto metrics = std::make_unique<PrometheusMetrics>(info);
  if (absl::Status s = metrics->Serve(options.host, options.metrics_port, [&serving] { return serving.load(); });
      !s.ok()) {
    return s;
  }
  return metrics;
}

SchedulerOptions SchedulerOptionsFor(const ServerOptions& options, const Engine& engine) {
  SchedulerOptions s;
  s.max_batch_tokens = options.max_batch_tokens;
  s.max_running = options.max_running;
  s.max_queue = options.max_queue;
  s.decoding = engine.Environment(options.max_gamma);
  s.tokenizer = engine.model->tokenizer.get();
  // Requests may adapt their draft length only on a server started for it.
  s.decoding.adaptive_gamma = options.adaptive_gamma;
  if (!options.acceptance_memory) s.decoding.acceptance_memory = nullptr;
  s.debug_forward_delay = std::chrono::milliseconds(options.debug_forward_delay_ms);
  if (options.debug_forward_delay_ms > 0) {
    spdlog::warn("--debug_forward_delay_ms={}: every forward sleeps first (debugging only)",
                 options.debug_forward_delay_ms);
  }
  return s;
}

RequestDefaults RequestDefaultsFor(const ServerOptions& options, const Model& model, const LoraAdapter* adapter) {
  RequestDefaults d;
  if (DrafterLayout(model, adapter) == "blocks") d.draft_layout = DraftLayout::kBlocks;
  // The model's own blocks (no adapter in its place): as deep as they were trained.
  if (adapter == nullptr && model.config.self_drafting()) d.block_rows = model.config.draft_block_rows;
  d.tokenizer = model.tokenizer.get();
  d.gamma = options.default_gamma;
  d.max_tokens = options.default_max_tokens;
  d.adaptive_gamma = options.adaptive_gamma;
  d.max_prompt_bytes = options.max_prompt_bytes > 0 ? static_cast<size_t>(options.max_prompt_bytes)
                                                    : PromptByteBound(*model.tokenizer, model.config.max_position);
  return d;
}

// What GetModelInfo reports. Paths and the host's CPU tell a client about the
// machine, not the model: only when the operator asks (--expose_model_paths).
void DescribeModel(const ServerOptions& options, const Engine& engine, GenerationServiceOptions& s) {
  s.model_path =
      options.expose_model_paths ? engine.model_path : std::filesystem::path(engine.model_path).filename().string();
  s.adapter_rank = engine.adapter ? engine.adapter->max_rank : 0;
  s.adapter_draft_layout = DrafterLayout(*engine.model, engine.adapter.get());
  const KvCacheConfig& kv_config = engine.kv->config();
  s.kv_capacity_tokens = int64_t{kv_config.num_blocks} * kv_config.block_size;
  s.backend = std::string(engine.backend->name());
  s.backend_device = engine.backend->device();
  if (const std::string cpu_prefix = cpu::CpuModelName() + ", ";
      !options.expose_model_paths && absl::StartsWith(s.backend_device, cpu_prefix)) {
    s.backend_device.erase(0, cpu_prefix.size());
  }
}

// What the gRPC services and the HTTP front door share.
struct Frontends {
  GenerationServiceOptions service;
  std::unique_ptr<ClientStreamLimiter> stream_limiter;  // gRPC and HTTP together
};

absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpc(const ServerOptions& options, const Security& security,
                                                        GenerationService& service, ReflectionService& reflection,
                                                        int* bound_port) {
  grpc::EnableDefaultHealthCheckService(true);  // open to all: probes carry no token
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.GrpcAddress(), security.credentials, bound_port);
  SetConnectionOptions(options, builder);
  builder.RegisterService(&service);
  if (options.reflection) builder.RegisterService(&reflection);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || *bound_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.GrpcAddress()));
  }
  SetHealth(*server, true);
  return server;
}

// The chat template /v1/chat/completions renders with: --chat_template's file, else the
// model's own. A file the operator named must load (else the server does not start); a
// model's template the interpreter cannot run leaves chat refused with the reason
// (completions still work), and the log names the template's line.
struct ChatSetup {
  std::shared_ptr<const chat::ChatFormatter> formatter;
  std::string refusal;  // why chat is refused, when formatter is null
};

absl::StatusOr<ChatSetup> LoadChat(const ServerOptions& options, const Model& model) {
  const TokenizerSpec& spec = model.tokenizer->spec();
  auto piece = [&spec](int32_t id) {
    return id >= 0 && id < static_cast<int32_t>(spec.tokens.size()) ? spec.tokens[id] : std::string();
  };
  chat::ChatTemplateSource source{model.chat_template, "the model's chat template", piece(spec.bos_id),
                                  piece(spec.eos_id)};
  if (!options.chat_template.empty()) {
    std::ifstream in(options.chat_template, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("--chat_template: cannot read ", options.chat_template));
    std::stringstream text;
    text << in.rdbuf();
    source.text = text.str();
    source.origin = options.chat_template;
  }
  ChatSetup setup;
  if (source.text.empty()) {
    setup.refusal = "this model has no chat template (give one with --chat_template); use /v1/completions with a prompt";
    return setup;
  }
  auto formatter = chat::ChatFormatter::Create(source);
  if (!formatter.ok()) {
    if (!options.chat_template.empty()) return formatter.status();
    setup.refusal = absl::StrCat("this model's chat template cannot be run: ", formatter.status().message(),
                                 "; use /v1/completions with a prompt, or give a template with --chat_template");
    return setup;
  }
  setup.formatter = std::make_shared<const chat::ChatFormatter>(*std::move(formatter));
  return setup;
}

// The OpenAI-compatible front door on the same scheduler (null with --http_port 0).
absl::StatusOr<std::unique_ptr<HttpFrontDoor>> StartHttp(const ServerOptions& options, const Engine& engine,
                                                         const std::string& served_model_name, Scheduler& scheduler,
                                                         const Frontends& frontends,
                                                         const std::atomic<bool>& draining) {
  if (options.http_port <= 0) return nullptr;
  const Model& model = *engine.model;
  HttpFrontDoorOptions h;
  h.host = options.host;
  h.port = options.http_port;
  h.workers = options.http_threads;
  h.max_connections = static_cast<size_t>(options.http_max_connections);
  h.max_connections_per_client = static_cast<size_t>(options.http_max_connections_per_client);
  h.ignore_unknown_fields = options.http_ignore_unknown_fields;
  h.max_body_bytes = static_cast<size_t>(options.max_message_bytes);
  h.tls = TlsFilesOf(options);
  h.served_model_name = served_model_name;
  h.context_length = model.config.max_position;
  auto chat = LoadChat(options, model);
  if (!chat.ok()) return chat.status();
  h.chat = chat->formatter;
  if (h.chat == nullptr) h.chat_refusal = chat->refusal;
  h.scheduler = &scheduler;
  h.env = frontends.service.env;
  h.defaults = frontends.service.defaults;
  h.tokens = frontends.service.tokens;
  h.stream_limiter = frontends.stream_limiter.get();
  h.metrics = frontends.service.metrics;
  h.draining = &draining;
  auto http = std::make_unique<HttpFrontDoor>(std::move(h));
  if (absl::Status s = http->Start(); !s.ok()) return s;
  if (chat->formatter == nullptr) {
    spdlog::warn("HTTP: /v1/chat/completions is refused ({}); /v1/completions works", chat->refusal);
  }
  return http;
}

void LogReady(const ServerOptions& options, const Engine& engine, const Security& security, int grpc_port,
              const HttpFrontDoor* http, const std::string& served_model_name) {
  const ModelConfig& c = engine.model->config;
  const KvCacheConfig& kv = engine.kv->config();
  const std::string transport = options.tls_client_ca_file.empty()
                                    ? (options.tls_cert_file.empty() ? "plaintext" : "TLS")
                                    : "mutual TLS";
  spdlog::info(
      "crossreg-server ready: grpc {}:{} ({}, {}), http {}, metrics {}, backend {}, model {} ({} layers, d={}, vocab "
      "{}, context {}), adapter {}, n-gram table {}, KV {} blocks x {} tokens of {} (prefix caching {}), max_running {}, max_queue {}, "
      "max_batch_tokens {}, gamma default {} max {}",
      options.host, grpc_port, transport, security.tokens.enabled() ? "bearer tokens" : "no authentication",
      http != nullptr ? absl::StrCat(options.host, ":", http->port(), " (OpenAI API, model \"", served_model_name,
                                     "\", chat template: ", http->ChatDescription(), ")")
                      : "off",
      options.metrics_port > 0 ? absl::StrCat(options.host, ":", options.metrics_port, "/metrics") : "off",
      engine.BackendDescription(), engine.model_path, c.num_layers, c.hidden_size, c.vocab_size, c.max_position,
      engine.adapter ? absl::StrCat(engine.adapter_path, " (rank ", engine.adapter->max_rank, ")") : "none",
      engine.ngram_table ? absl::StrCat(engine.ngram_table_path, " (", engine.ngram_table->entries(), " n-grams)")
                         : "none",
      kv.num_blocks, kv.block_size, KvDtypeName(engine.kv_dtype), kv.prefix_caching ? "on" : "off", options.max_running, options.max_queue, options.max_batch_tokens,
      options.default_gamma, options.max_gamma);
  if (engine.backend->name() == "cpu") spdlog::info("memory: {}", cpu::HugePageSummary());
}

// The composition root: options -> security -> engine -> metrics -> scheduler ->
// services (gRPC, HTTP); then it waits for SIGTERM/SIGINT and drains in reverse.
int Run(const ServerOptions& options, const sigset_t& stop_signals) {
  RouteLibraryLogs();
  auto security = LoadSecurity(options);
  if (!security.ok()) return Fail(security.status());
  auto opened = OpenEngine(EngineOptionsFor(options));
  if (!opened.ok()) return Fail(opened.status());
  Engine& engine = **opened;
  LogEngine(options, engine);
  const std::string served_model_name = options.served_model_name.empty()
                                            ? std::filesystem::path(engine.model_path).stem().string()
                                            : options.served_model_name;

  std::atomic<bool> serving{false};
  auto metrics = StartMetrics(options, engine, serving);
  if (!metrics.ok()) return Fail(metrics.status());
  const SchedulerOptions scheduler_options = SchedulerOptionsFor(options, engine);
  Scheduler scheduler(scheduler_options, *engine.backend, *engine.kv, metrics->get());
  scheduler.Start();

  Frontends frontends;
  frontends.stream_limiter = std::make_unique<ClientStreamLimiter>(options.max_streams_per_client);
  GenerationServiceOptions& service_options = frontends.service;
  service_options.env = scheduler_options.decoding;
  service_options.defaults = RequestDefaultsFor(options, *engine.model, engine.adapter.get());
  // Structured output: constraints compiled over the served vocabulary, shared by the
  // requests that repeat them (with their cache of token masks).
  grammar::GrammarCompiler grammars(
      grammar::VocabularyOf(*engine.model->tokenizer, engine.model->config.eos_token_ids));
  service_options.defaults.grammars = &grammars;
  service_options.tokens = &security->tokens;
  service_options.stream_limiter = frontends.stream_limiter.get();
  service_options.metrics = metrics->get();
  DescribeModel(options, engine, service_options);
  GenerationService service(scheduler, service_options);
  std::vector<std::string> services = {kServiceName, kHealthServiceName};
  if (options.reflection) services.push_back(kReflectionServiceName);
  ReflectionService reflection(services, &security->tokens);
  int grpc_port = 0;
  auto grpc_server = StartGrpc(options, *security, service, reflection, &grpc_port);
  if (!grpc_server.ok()) return Fail(grpc_server.status());
  serving.store(true);
  std::atomic<bool> http_draining{false};
  auto http = StartHttp(options, engine, served_model_name, scheduler, frontends, http_draining);
  if (!http.ok()) return Fail(http.status());
  LogReady(options, engine, *security, grpc_port, http->get(), served_model_name);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("signal {}: draining (new calls refused, in-flight calls get {:.0f} s)", signal_number,
               options.drain_timeout_s);
  SetHealth(**grpc_server, false);
  serving.store(false);
  service.StartDraining();
  http_draining.store(true);
  scheduler.Shutdown(std::chrono::milliseconds(static_cast<int64_t>(options.drain_timeout_s * 1000)));
  (*grpc_server)->Shutdown(std::chrono::system_clock::now() + kGrpcLastWritesGrace);
  if (*http != nullptr) (*http)->Stop();
  spdlog::info("crossreg-server stopped");
  return 0;
}

}  // namespace
}  // namespace crossreg::server

int main(int argc, char** argv) {
  auto options = crossreg::server::ParseServerOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "crossreg-server: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  // Logs on stderr, as container runtimes and process supervisors expect.
  crossreg::server::ConfigureLogging(options->log_format, options->log_level);
  // Every thread started from here inherits the mask, so only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return crossreg::server::Run(*options, stop_signals);
}
