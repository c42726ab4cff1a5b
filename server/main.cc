// crossreg-server: loads a model (and optionally a Cross-Regression adapter), runs
// the continuous-batching scheduler on the CPU backend and serves
// crossreg.v1.Generation, grpc.health.v1.Health and server reflection over gRPC, with
// Prometheus metrics on their own port. SIGTERM/SIGINT drain and exit 0.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/decoding/forward_cost_curve.h"
#include "engine/model/default_model.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/paged_kv_cache.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "scheduler/scheduler.h"
#include "server/generation_service.h"
#include "server/prometheus_metrics.h"
#include "server/server_options.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace crossreg::server {
namespace {

constexpr char kServiceName[] = "crossreg.v1.Generation";

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
  std::string model_path = options.model;
  std::string adapter_path = options.adapter;
  if (model_path.empty()) {
    auto found = FindDefaultModel();
    if (!found.ok()) {
      return Fail(absl::StrCat("no --model given: ", found.status().message()));
    }
    model_path = *found;
    // The default model brings its own Cross-Regression adapter.
    if (adapter_path.empty()) adapter_path = BundledAdapter(model_path);
  }
  auto model_or = LoadModel(model_path);
  if (!model_or.ok()) return Fail(absl::StrCat("cannot load model ", model_path, ": ", model_or.status().message()));
  const Model& model = **model_or;

  std::unique_ptr<LoraAdapter> adapter;
  if (!adapter_path.empty()) {
    auto loaded = LoadLoraAdapter(adapter_path, model.config);
    if (!loaded.ok()) {
      return Fail(absl::StrCat("cannot load adapter ", adapter_path, ": ", loaded.status().message()));
    }
    adapter = std::move(*loaded);
  }

  CpuBackendOptions backend_options;
  backend_options.num_threads = options.threads;
  backend_options.adapter = adapter.get();
  backend_options.kv.block_size = options.kv_block_size;
  const int64_t blocks = options.kv_blocks > 0
                             ? options.kv_blocks
                             : KvBlocksForBytes(model.config, options.kv_block_size, options.kv_memory_mb << 20);
  if (blocks < 1) return Fail(absl::StrCat("--kv_memory_mb ", options.kv_memory_mb, " holds no KV block of this model"));
  backend_options.kv.num_blocks = static_cast<int>(blocks);
  auto backend = CreateCpuBackend(model, backend_options);
  if (!backend.ok()) return Fail(absl::StrCat("cannot create the CPU backend: ", backend.status().message()));
  PagedKvCache kv(backend_options.kv);

  std::unique_ptr<PrometheusMetrics> metrics;
  if (options.metrics_port > 0) {
    metrics = std::make_unique<PrometheusMetrics>();
    const std::string address = absl::StrCat(options.host, ":", options.metrics_port);
    if (auto s = metrics->Serve(address); !s.ok()) return Fail(std::string(s.message()));
  }

  // The cost curve behind adaptive draft lengths: timed once, before serving.
  std::optional<ForwardCostCurve> cost_curve;
  if (options.adaptive_gamma) {
    DecodingConfig widest;
    widest.mode = DecodingMode::kLossless;
    widest.gamma = options.max_gamma;
    const int rows = std::min({MaxDecodeRows(widest), 64, options.max_batch_tokens});
    const int context = std::max(1, std::min(64, model.config.max_position - rows));
    auto measured = ForwardCostCurve::Measure(**backend, kv, model.config, rows, context);
    if (!measured.ok()) {
      return Fail(absl::StrCat("--adaptive_gamma: measuring the forward cost curve: ", measured.status().message()));
    }
    cost_curve = *std::move(measured);
    std::string points;
    for (const auto& [r, seconds] : cost_curve->points()) {
      absl::StrAppend(&points, points.empty() ? "" : ", ", r, " rows ", absl::StrFormat("%.3f", seconds * 1e3), " ms");
    }
    spdlog::info("forward cost curve (adaptive gamma): {}", points);
  }

  SchedulerOptions scheduler_options;
  scheduler_options.max_batch_tokens = options.max_batch_tokens;
  scheduler_options.max_running = options.max_running;
  scheduler_options.max_queue = options.max_queue;
  scheduler_options.max_gamma = options.max_gamma;
  scheduler_options.has_adapter = adapter != nullptr;
  scheduler_options.placeholder_token = adapter ? adapter->placeholder_token_id : 0;
  scheduler_options.cost_curve = cost_curve ? &*cost_curve : nullptr;
  Scheduler scheduler(scheduler_options, **backend, kv, model.config, metrics.get());
  scheduler.Start();

  GenerationServiceOptions service_options;
  service_options.limits.model = &model.config;
  service_options.limits.tokenizer = model.tokenizer.get();
  service_options.limits.has_adapter = adapter != nullptr;
  service_options.limits.placeholder_token = scheduler_options.placeholder_token;
  service_options.limits.max_gamma = options.max_gamma;
  service_options.limits.default_gamma = options.default_gamma;
  service_options.limits.default_max_tokens = options.default_max_tokens;
  service_options.limits.can_adapt_gamma = cost_curve.has_value();
  service_options.limits.default_adaptive_gamma = options.adaptive_gamma;
  service_options.model_path = model_path;
  service_options.adapter_rank = adapter ? adapter->max_rank : 0;
  service_options.kv_capacity_tokens = blocks * options.kv_block_size;
  GenerationService service(scheduler, service_options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(options.GrpcAddress(), grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) return Fail(absl::StrCat("cannot listen on ", options.GrpcAddress()));
  SetHealth(*server, true);

  const ModelConfig& c = model.config;
  spdlog::info("crossreg-server ready: grpc {}:{}, metrics {}, model {} ({} layers, d={}, vocab {}, context {}), "
               "adapter {}, KV {} blocks x {} tokens, max_running {}, max_queue {}, max_batch_tokens {}, "
               "gamma default {} max {}",
               options.host, bound_port,
               options.metrics_port > 0 ? absl::StrCat(options.host, ":", options.metrics_port, "/metrics") : "off",
               model_path, c.num_layers, c.hidden_size, c.vocab_size, c.max_position,
               adapter ? absl::StrCat(adapter_path, " (rank ", adapter->max_rank, ")") : "none", blocks,
               options.kv_block_size, options.max_running, options.max_queue, options.max_batch_tokens,
               options.default_gamma, options.max_gamma);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("signal {}: draining (new calls refused, in-flight calls get {:.0f} s)", signal_number,
               options.drain_timeout_s);
  SetHealth(*server, false);
  service.StartDraining();
  scheduler.Shutdown(std::chrono::milliseconds(static_cast<int64_t>(options.drain_timeout_s * 1000)));
  // Every Generate call has its final event now; give their last writes a moment.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
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
  spdlog::set_default_logger(spdlog::stderr_color_mt("crossreg"));
  spdlog::set_level(spdlog::level::from_str(options->log_level));
  // Every thread started from here inherits the mask, so only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return crossreg::server::Run(*options, stop_signals);
}
