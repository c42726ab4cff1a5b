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
int Fail(const std::string& message) {
  spdlog::critical("{}", message);
  return 1;
}

void SetHealth(grpc::Server& server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  health->SetServingStatus(kServiceName, serving);
}

int Run(const ServerOptions& options, const sigset_t& stop_signals) {
  RouteLibraryLogs();
  // Credentials before the model: a typo in a path should not wait for a load.
  std::vector<std::string> tls_warnings;
  auto credentials = MakeServerCredentials(
      {options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file}, &tls_warnings);
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
  for (const std::string& w : tls_warnings) spdlog::warn("{}", w);
  TokenAuthenticator tokens;
  if (!options.auth_token_file.empty()) {
    auto loaded = LoadTokenFile(options.auth_token_file);
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    tokens = TokenAuthenticator(std::move(*loaded));
  }
  if (tokens.enabled() && options.tls_cert_file.empty()) {
    spdlog::warn("bearer tokens over plaintext can be read by anyone on the network path; serve TLS "
                 "(--tls_cert_file) unless a mesh encrypts the traffic");
  }

  EngineOptions engine_options;
  engine_options.model_path = options.model;
  engine_options.adapter_path = options.adapter;
  engine_options.ngram_table_path = options.ngram_table;
  engine_options.backend = options.backend;
  engine_options.cpu_threads = options.threads;
  engine_options.cuda_device = options.cuda_device;
  engine_options.kv_block_size = options.kv_block_size;
  engine_options.kv_dtype = options.kv_dtype;
  engine_options.quantize = options.quantize;
  engine_options.kv_blocks = options.kv_blocks;
  engine_options.kv_memory_bytes = options.kv_memory_mb << 20;
  if (options.adaptive_gamma) {
    // The widest forward a request may make, so the curve covers every γ' it can pick,
    // and, under load, the margin of a forward that already holds other sequences' rows
    // (draft_length_policy.h): up to 128 rows, extended linearly past that.
    DecodingConfig widest;
    widest.mode = DecodingMode::kLossless;
    widest.gamma = options.max_gamma;
    engine_options.cost_curve_rows =
        std::min({MaxDecodeRows(widest) + std::max(0, options.max_running - 1), 128, options.max_batch_tokens});
  } else if (options.metrics_port > 0) {
    // A short curve anchors the speedup accounting's cost model (docs/metrics.md): up
    // to a default-gamma speculative forward.
    DecodingConfig typical;
    typical.mode = DecodingMode::kLossless;
    typical.gamma = options.default_gamma;
    engine_options.cost_curve_rows = std::min({MaxDecodeRows(typical), 32, options.max_batch_tokens});
  }
  auto opened = OpenEngine(engine_options);
  if (!opened.ok()) return Fail(std::string(opened.status().message()));
  Engine& engine = **opened;
  const Model& model = *engine.model;
  if (!engine.quantize_summary.empty()) spdlog::info("--quantize: {}", engine.quantize_summary);
  if (engine.adapter != nullptr) {
    for (const std::string& w : engine.adapter->warnings) spdlog::warn("adapter {}: {}", engine.adapter_path, w);
  }
  const std::string served_model_name = options.served_model_name.empty()
                                            ? std::filesystem::path(engine.model_path).stem().string()
                                            : options.served_model_name;
  if (engine.cost_curve.has_value()) {
    spdlog::info("forward cost curve ({}): {}", options.adaptive_gamma ? "adaptive gamma, speedup metrics" : "speedup metrics",
                 engine.CostCurveDescription());
  }

  // GET /ready on the metrics port follows the gRPC health status.
  std::atomic<bool> serving{false};
  std::unique_ptr<PrometheusMetrics> metrics;
  if (options.metrics_port > 0) {
    ModelInfoLabels info;
    info.model_name = std::filesystem::path(engine.model_path).filename().string();
    info.backend = std::string(engine.backend->name());
    info.device = engine.backend->device();
    info.adapter = engine.adapter_path.empty() ? "none"
                                               : std::filesystem::path(engine.adapter_path).filename().string();
    metrics = std::make_unique<PrometheusMetrics>(
        info, engine.cost_curve.has_value() ? engine.cost_curve->points() : std::vector<std::pair<int, double>>{});
    auto ready = [&serving] { return serving.load(); };
    if (auto s = metrics->Serve(options.host, options.metrics_port, ready); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }

  SchedulerOptions scheduler_options;
  scheduler_options.max_batch_tokens = options.max_batch_tokens;
  scheduler_options.max_running = options.max_running;
  scheduler_options.max_queue = options.max_queue;
  scheduler_options.decoding = engine.Environment(options.max_gamma);
  // Requests may adapt their draft length only on a server started for it.
  if (!options.adaptive_gamma) scheduler_options.decoding.cost_curve = nullptr;
  if (!options.acceptance_memory) scheduler_options.decoding.acceptance_memory = nullptr;
  scheduler_options.debug_forward_delay = std::chrono::milliseconds(options.debug_forward_delay_ms);
  if (options.debug_forward_delay_ms > 0) {
    spdlog::warn("--debug_forward_delay_ms={}: every forward sleeps first (debugging only)", options.debug_forward_delay_ms);
  }
  Scheduler scheduler(scheduler_options, *engine.backend, *engine.kv, metrics.get());
  scheduler.Start();

  GenerationServiceOptions service_options;
  service_options.env = scheduler_options.decoding;
  service_options.defaults.tokenizer = model.tokenizer.get();
  service_options.defaults.gamma = options.default_gamma;
  service_options.defaults.max_tokens = options.default_max_tokens;
  service_options.defaults.adaptive_gamma = options.adaptive_gamma;
  service_options.defaults.max_prompt_bytes =
      options.max_prompt_bytes > 0 ? static_cast<size_t>(options.max_prompt_bytes)
                                   : PromptByteBound(*model.tokenizer, model.config.max_position);
  service_options.tokens = &tokens;
  ClientStreamLimiter stream_limiter(options.max_streams_per_client);  // gRPC and HTTP together
  service_options.stream_limiter = &stream_limiter;
  service_options.metrics = metrics.get();
  // Paths and the host's CPU tell a client about the machine, not the model: only
  // when the operator asks (--expose_model_paths).
  service_options.model_path =
      options.expose_model_paths ? engine.model_path : std::filesystem::path(engine.model_path).filename().string();
  service_options.adapter_rank = engine.adapter ? engine.adapter->max_rank : 0;
  const KvCacheConfig& kv_config = engine.kv->config();
  service_options.kv_capacity_tokens = int64_t{kv_config.num_blocks} * kv_config.block_size;
  service_options.backend = std::string(engine.backend->name());
  service_options.backend_device = engine.backend->device();
  if (const std::string cpu_prefix = cpu::CpuModelName() + ", ";
      !options.expose_model_paths && absl::StartsWith(service_options.backend_device, cpu_prefix)) {
    service_options.backend_device.erase(0, cpu_prefix.size());
  }
  GenerationService service(scheduler, service_options);

  grpc::EnableDefaultHealthCheckService(true);  // open to all: probes carry no token
  std::vector<std::string> services = {kServiceName, kHealthServiceName};
  if (options.reflection) services.push_back(kReflectionServiceName);
  ReflectionService reflection(services, &tokens);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(options.GrpcAddress(), *credentials, &bound_port);
  SetConnectionOptions(options, builder);
  builder.RegisterService(&service);
  if (options.reflection) builder.RegisterService(&reflection);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) return Fail(absl::StrCat("cannot listen on ", options.GrpcAddress()));
  SetHealth(*server, true);
  serving.store(true);

  // The OpenAI-compatible front door, on the same scheduler.
  std::atomic<bool> http_draining{false};
  std::unique_ptr<HttpFrontDoor> http;
  const ChatTemplateFamily chat_family = RecognizeChatTemplate(model.chat_template, "", "").family;
  if (options.http_port > 0) {
    HttpFrontDoorOptions h;
    h.host = options.host;
    h.port = options.http_port;
    h.workers = options.http_threads;
    h.max_connections = static_cast<size_t>(options.http_max_connections);
    h.max_connections_per_client = static_cast<size_t>(options.http_max_connections_per_client);
    h.ignore_unknown_fields = options.http_ignore_unknown_fields;
    h.max_body_bytes = static_cast<size_t>(options.max_message_bytes);
    h.tls = {options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file};
    h.served_model_name = served_model_name;
    h.context_length = model.config.max_position;
    const TokenizerSpec& spec = model.tokenizer->spec();
    auto piece = [&spec](int32_t id) {
      return id >= 0 && id < static_cast<int32_t>(spec.tokens.size()) ? spec.tokens[id] : std::string();
    };
    h.chat = RecognizeChatTemplate(model.chat_template, piece(spec.bos_id), piece(spec.eos_id));
    h.scheduler = &scheduler;
    h.env = scheduler_options.decoding;
    h.defaults = service_options.defaults;
    h.tokens = &tokens;
    h.stream_limiter = &stream_limiter;
    h.metrics = metrics.get();
    h.draining = &http_draining;
    http = std::make_unique<HttpFrontDoor>(std::move(h));
    if (auto s = http->Start(); !s.ok()) return Fail(std::string(s.message()));
    if (model.chat_template.empty()) {
      spdlog::info("HTTP: the model has no chat template: /v1/chat/completions is refused, /v1/completions works");
    } else if (chat_family == ChatTemplateFamily::kNone) {
      spdlog::warn("HTTP: the model's chat template is not one crossreg recognises (Llama 3, Llama 2, Mistral, "
                   "ChatML): /v1/chat/completions is refused");
    }
  }

  const ModelConfig& c = model.config;
  const std::string transport = options.tls_client_ca_file.empty()
                                    ? (options.tls_cert_file.empty() ? "plaintext" : "TLS")
                                    : "mutual TLS";
  spdlog::info("crossreg-server ready: grpc {}:{} ({}, {}), http {}, metrics {}, backend {}, model {} ({} layers, d={}, vocab "
               "{}, context {}), adapter {}, n-gram table {}, KV {} blocks x {} tokens, max_running {}, max_queue {}, max_batch_tokens "
               "{}, gamma default {} max {}",
               options.host, bound_port, transport, tokens.enabled() ? "bearer tokens" : "no authentication",
               http ? absl::StrCat(options.host, ":", http->port(), " (OpenAI API, model \"", served_model_name,
                                   "\", chat template ", ChatTemplateFamilyName(chat_family), ")")
                    : "off",
               options.metrics_port > 0 ? absl::StrCat(options.host, ":", options.metrics_port, "/metrics") : "off",
               engine.BackendDescription(), engine.model_path, c.num_layers, c.hidden_size, c.vocab_size,
               c.max_position,
               engine.adapter ? absl::StrCat(engine.adapter_path, " (rank ", engine.adapter->max_rank, ")") : "none",
               engine.ngram_table ? absl::StrCat(engine.ngram_table_path, " (", engine.ngram_table->entries(), " n-grams)")
                                  : "none",
               kv_config.num_blocks, kv_config.block_size, options.max_running, options.max_queue,
               options.max_batch_tokens, options.default_gamma, options.max_gamma);
  if (engine.backend->name() == "cpu") spdlog::info("memory: {}", cpu::HugePageSummary());

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("signal {}: draining (new calls refused, in-flight calls get {:.0f} s)", signal_number,
               options.drain_timeout_s);
  SetHealth(*server, false);
  serving.store(false);
  service.StartDraining();
  http_draining.store(true);
  scheduler.Shutdown(std::chrono::milliseconds(static_cast<int64_t>(options.drain_timeout_s * 1000)));
  // Every Generate call has its final event now; give their last writes a moment.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (http) http->Stop();
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
