#include "server/server_options.h"

#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/decoding/decoding_config.h"
#include "engine/model/model_quantizer.h"
#include "common/flags/flag_spelling.h"

// Defaults come from ServerOptions so that the struct is the one place they live.
namespace {
const crossreg::server::ServerOptions kDefaults;
}

ABSL_FLAG(std::string, model, kDefaults.model,
          "Model: a .gguf file or a Hugging Face directory (default: the embedded default model)");
ABSL_FLAG(std::string, adapter, kDefaults.adapter,
          "Cross-Regression adapter (PEFT LoRA directory); without it lossless/lossy requests fail");
ABSL_FLAG(std::string, ngram_table, kDefaults.ngram_table,
          "Corpus n-gram table for n-gram drafts (python3 -m training ngram-table); default: the model directory's "
          "ngram_table.bin if it has one; none: draft from each request's own context only");
ABSL_FLAG(std::string, host, kDefaults.host,
          "Address to listen on (0.0.0.0: all interfaces, as containers need; 127.0.0.1: local only)");
ABSL_FLAG(int, port, kDefaults.port, "gRPC port");
ABSL_FLAG(int, metrics_port, kDefaults.metrics_port, "Prometheus /metrics port; 0 = no metrics endpoint");
ABSL_FLAG(int, http_port, kDefaults.http_port,
          "OpenAI-compatible HTTP port (POST /v1/completions, /v1/chat/completions, GET /v1/models, /health); 0 = "
          "off. Same scheduler, tokens and TLS files as gRPC");
ABSL_FLAG(int, http_threads, kDefaults.http_threads,
          "HTTP worker threads turning requests and generation events into replies (connections cost no thread; "
          "handlers never wait on a generation)");
ABSL_FLAG(int, http_max_connections, kDefaults.http_max_connections,
          "Open HTTP connections in all; more are refused with 503 (TLS: closed)");
ABSL_FLAG(int, http_max_connections_per_client, kDefaults.http_max_connections_per_client,
          "Open HTTP connections from one IP address; more are refused with 503 (TLS: closed)");
ABSL_FLAG(bool, http_ignore_unknown_fields, kDefaults.http_ignore_unknown_fields,
          "Ignore unknown fields in HTTP request bodies instead of answering 400 naming them (for clients that send "
          "extras)");
ABSL_FLAG(bool, expose_model_paths, kDefaults.expose_model_paths,
          "GetModelInfo reports the model's and adapter's filesystem paths (admin use; off: file names only)");
ABSL_FLAG(std::string, chat_template, kDefaults.chat_template,
          "A Jinja chat template file for /v1/chat/completions, in place of the model's own (GGUF "
          "tokenizer.chat_template or tokenizer_config.json chat_template); empty: the model's");
ABSL_FLAG(std::string, served_model_name, kDefaults.served_model_name,
          "The model's name in the HTTP API (GET /v1/models, the \"model\" field); empty = the model file's or "
          "directory's name");
ABSL_FLAG(std::string, backend, crossreg::BackendChoiceName(kDefaults.backend),
          "Compute backend: cpu, cuda (fails when no CUDA device is available) or auto (CUDA when this build has it "
          "and a device is visible, else CPU)");
ABSL_FLAG(int, cuda_device, kDefaults.cuda_device, "CUDA backend: device ordinal");
ABSL_FLAG(int, threads, kDefaults.threads,
          "CPU compute threads; 0 = one per usable core (the affinity mask, capped by the cgroup CPU limit)");
ABSL_FLAG(int64_t, kv_memory_mb, kDefaults.kv_memory_mb, "KV cache memory in MiB (used when --kv_blocks is 0)");
ABSL_FLAG(int, kv_blocks, kDefaults.kv_blocks, "KV cache size in blocks; overrides --kv_memory_mb when > 0");
ABSL_FLAG(int, kv_block_size, kDefaults.kv_block_size, "Token slots per KV cache block");
ABSL_FLAG(std::string, kv_dtype, crossreg::KvDtypeChoiceName(kDefaults.kv_dtype),
          "K/V cache element type: f32, bf16 (half the memory and attention reads) or auto (bf16 on the CPU backend "
          "unless the model's weights are f32; f32 on CUDA). Lossless decoding equals AR at either");
ABSL_FLAG(bool, prefix_caching, kDefaults.prefix_caching,
          "Automatic prefix caching: full KV blocks of a prompt (and of generated text) stay cached, so a later "
          "request with the same prefix (a system prompt, an earlier turn) skips their prefill. Outputs are the same "
          "either way; --prefix_caching=false turns it off");
ABSL_FLAG(std::string, quantize, "none",
          "Quantize the model's matrices at load: none, q8_0, q4_0, q4_k, q5_k or q6_k (for float models, e.g. "
          "Hugging Face directories; GGUF files that are quantized already load as they are). The adapter "
          "stays floating point; lossless decoding equals AR on the quantized model");
ABSL_FLAG(std::string, weights, crossreg::DeviceWeightsName(kDefaults.device_weights),
          "CUDA backend: the decoder layers' weights on the device, bf16 or fp8 (e4m3 with a scale per output "
          "row, quantized at load: half the bytes a decode step reads; lossless decoding equals AR on the FP8 "
          "model). The CPU backend refuses fp8");
ABSL_FLAG(int, max_batch_tokens, kDefaults.max_batch_tokens, "Most rows (prefill + decode/verify) per forward");
ABSL_FLAG(int, max_running, kDefaults.max_running, "Most sequences decoding at once");
ABSL_FLAG(int, max_queue, kDefaults.max_queue, "Most waiting requests; beyond it Generate fails RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_gamma, kDefaults.max_gamma, "Largest gamma (draft slots per forward) a request may ask for");
ABSL_FLAG(int, default_gamma, kDefaults.default_gamma, "Gamma for requests that leave it 0");
ABSL_FLAG(bool, adaptive_gamma, kDefaults.adaptive_gamma,
          "Measure the forward cost curve at start; speculative requests then pick each forward's draft length "
          "(0 = AR) for the most tokens per second unless they set decoding.adaptive_gamma = false. "
          "--adaptive_gamma=false: every request runs at its gamma");
ABSL_FLAG(bool, acceptance_memory, kDefaults.acceptance_memory,
          "With --adaptive_gamma: a request starts from the draft acceptance earlier requests of its class "
          "(mode, beta/tau, forking, greedy or sampled) saw, and probes on one schedule with them; false: each "
          "request learns alone, and a seed reproduces a sampled adaptive output at the same load");
ABSL_FLAG(int, default_max_tokens, kDefaults.default_max_tokens, "max_tokens for requests that leave it unset");
ABSL_FLAG(double, drain_timeout_s, kDefaults.drain_timeout_s,
          "On SIGTERM/SIGINT: seconds in-flight requests may run before they are cancelled");
ABSL_FLAG(std::string, log_level, kDefaults.log_level, "trace, debug, info, warn, error or off");
ABSL_FLAG(std::string, log_format, "text",
          "text (spdlog lines) or json (one object per line: time, level, msg, and event fields such as a "
          "request's end: request_id, client, mode, reason, tokens, timings)");
ABSL_FLAG(std::string, tls_cert_file, kDefaults.tls_cert_file,
          "TLS: PEM certificate chain (leaf first) to serve gRPC over TLS; needs --tls_key_file");
ABSL_FLAG(std::string, tls_key_file, kDefaults.tls_key_file, "TLS: PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, kDefaults.tls_client_ca_file,
          "Mutual TLS: PEM CA bundle; clients must present a certificate it signed (their identity owns their "
          "requests)");
ABSL_FLAG(std::string, auth_token_file, kDefaults.auth_token_file,
          "Bearer tokens, one per line as name:token (or the token alone); calls without 'authorization: Bearer "
          "<token>' get UNAUTHENTICATED. Health checks stay open");
ABSL_FLAG(bool, reflection, kDefaults.reflection,
          "Serve gRPC server reflection (grpcurl without .proto files); it needs a token when --auth_token_file is "
          "set");
ABSL_FLAG(int, max_streams_per_client, kDefaults.max_streams_per_client,
          "Most Generate streams one client (token name, certificate identity, or else IP address) may have open; "
          "beyond it RESOURCE_EXHAUSTED. 0 = no limit");
ABSL_FLAG(int64_t, max_prompt_bytes, kDefaults.max_prompt_bytes,
          "Longest prompt text in bytes, refused before tokenizing; 0 = the most that could fit the context "
          "(context length x the longest token's bytes)");
ABSL_FLAG(int64_t, max_message_bytes, kDefaults.max_message_bytes, "Largest request message gRPC accepts, in bytes");
ABSL_FLAG(double, keepalive_time_s, kDefaults.keepalive_time_s,
          "Ping connections idle this long, to find dead clients and keep NAT/load-balancer state alive; 0 = never");
ABSL_FLAG(double, keepalive_timeout_s, kDefaults.keepalive_timeout_s,
          "Close a connection whose keepalive ping is unanswered this long");
ABSL_FLAG(double, min_client_ping_interval_s, kDefaults.min_client_ping_interval_s,
          "Clients may send keepalive pings this often (also without calls); more often gets GOAWAY too_many_pings");
ABSL_FLAG(double, max_connection_age_s, kDefaults.max_connection_age_s,
          "Close each connection gracefully after this long (calls in flight finish), so that clients re-resolve "
          "and spread over new replicas; 0 = never");
ABSL_FLAG(int, debug_forward_delay_ms, kDefaults.debug_forward_delay_ms,
          "Debugging only: sleep this long before every forward, to watch cancellation, deadlines and queueing by "
          "hand; keep 0 in production");

namespace crossreg::server {

absl::Status ServerOptions::Validate() const {
  auto range = [](const char* flag, int64_t value, int64_t lo, int64_t hi) -> absl::Status {
    if (value < lo || value > hi) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be in [", lo, ", ", hi, "], got ", value));
    }
    return absl::OkStatus();
  };
  for (auto s : {range("port", port, 0, 65535), range("metrics_port", metrics_port, 0, 65535),
                 range("http_port", http_port, 0, 65535), range("http_threads", http_threads, 1, 1024),
                 range("http_max_connections", http_max_connections, 1, 1 << 20),
                 range("http_max_connections_per_client", http_max_connections_per_client, 1, 1 << 20),
                 range("threads", threads, 0, 4096), range("cuda_device", cuda_device, 0, 1024), range("kv_memory_mb", kv_memory_mb, 1, int64_t{1} << 30),
                 range("kv_blocks", kv_blocks, 0, 1 << 30), range("kv_block_size", kv_block_size, 1, 4096),
                 range("max_batch_tokens", max_batch_tokens, 1, 1 << 20), range("max_running", max_running, 1, 1 << 16),
                 range("max_queue", max_queue, 0, 1 << 20), range("max_gamma", max_gamma, 1, kMaxGamma),
                 range("default_gamma", default_gamma, 1, max_gamma),
                 range("default_max_tokens", default_max_tokens, 1, 1 << 24),
                 range("max_streams_per_client", max_streams_per_client, 0, 1 << 20),
                 range("max_prompt_bytes", max_prompt_bytes, 0, int64_t{1} << 31),
                 range("max_message_bytes", max_message_bytes, 1024, int64_t{1} << 31),
                 range("debug_forward_delay_ms", debug_forward_delay_ms, 0, 60000)}) {
    if (!s.ok()) return s;
  }
  if (!(drain_timeout_s >= 0)) return absl::InvalidArgumentError("--drain_timeout_s must be >= 0");
  const std::pair<const char*, double> durations[] = {{"keepalive_time_s", keepalive_time_s},
                                                      {"keepalive_timeout_s", keepalive_timeout_s},
                                                      {"min_client_ping_interval_s", min_client_ping_interval_s},
                                                      {"max_connection_age_s", max_connection_age_s}};
  for (const auto& [flag, seconds] : durations) {
    // Up to a day; gRPC takes milliseconds as int.
    if (!(seconds >= 0 && seconds <= 86400)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be in [0, 86400] seconds, got ", seconds));
    }
  }
  if (tls_cert_file.empty() != tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert_file and --tls_key_file go together: give both or neither");
  }
  if (!tls_client_ca_file.empty() && tls_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca_file needs --tls_cert_file and --tls_key_file (mutual TLS is TLS plus client certificates)");
  }
  if (host.empty()) return absl::InvalidArgumentError("--host must not be empty");
  if (http_port != 0 && (http_port == port || http_port == metrics_port)) {
    return absl::InvalidArgumentError(absl::StrCat("--http_port ", http_port, " is already --port or --metrics_port"));
  }
  if (metrics_port != 0 && metrics_port == port) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics_port ", metrics_port, " is already --port"));
  }
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  bool known_level = false;
  for (const char* level : kLevels) known_level |= log_level == level;
  if (!known_level) return absl::InvalidArgumentError("--log_level must be trace, debug, info, warn, error or off");
  return absl::OkStatus();
}

std::string ServerOptions::GrpcAddress() const {
  // IPv6 literals need brackets in a host:port address.
  const bool ipv6 = absl::StrContains(host, ':') && host.front() != '[';
  return ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::StatusOr<ServerOptions> ParseServerOptions(int argc, char** argv) {
  // --help lists this program's flags (those defined in server/), not Abseil's own.
  const std::vector<std::string> positional = tools::ParseFlags(
      argc, argv, "server/",
      "The crossreg gRPC inference server (crossreg.v1.Generation, health, reflection, /metrics).\n"
      "  crossreg-server --model PATH [--adapter DIR] [--port 50051] [--http_port 8000] [--metrics_port 9090]\n"
      "Flags may be written with dashes or underscores (--kv-blocks).");
  if (positional.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", positional[1], "' (flags start with --)"));
  }
  ServerOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.adapter = absl::GetFlag(FLAGS_adapter);
  o.ngram_table = absl::GetFlag(FLAGS_ngram_table);
  o.host = absl::GetFlag(FLAGS_host);
  o.port = absl::GetFlag(FLAGS_port);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.http_port = absl::GetFlag(FLAGS_http_port);
  o.http_threads = absl::GetFlag(FLAGS_http_threads);
  o.http_max_connections = absl::GetFlag(FLAGS_http_max_connections);
  o.http_max_connections_per_client = absl::GetFlag(FLAGS_http_max_connections_per_client);
  o.http_ignore_unknown_fields = absl::GetFlag(FLAGS_http_ignore_unknown_fields);
  o.expose_model_paths = absl::GetFlag(FLAGS_expose_model_paths);
  o.served_model_name = absl::GetFlag(FLAGS_served_model_name);
  o.chat_template = absl::GetFlag(FLAGS_chat_template);
  auto backend = ParseBackendChoice(absl::GetFlag(FLAGS_backend));
  if (!backend.ok()) return backend.status();
  o.backend = *backend;
  o.cuda_device = absl::GetFlag(FLAGS_cuda_device);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.kv_memory_mb = absl::GetFlag(FLAGS_kv_memory_mb);
  o.kv_blocks = absl::GetFlag(FLAGS_kv_blocks);
  o.kv_block_size = absl::GetFlag(FLAGS_kv_block_size);
  auto kv_dtype = ParseKvDtypeChoice(absl::GetFlag(FLAGS_kv_dtype));
  if (!kv_dtype.ok()) return kv_dtype.status();
  o.kv_dtype = *kv_dtype;
  o.prefix_caching = absl::GetFlag(FLAGS_prefix_caching);
  auto quantize = ParseQuantizeType(absl::GetFlag(FLAGS_quantize));
  if (!quantize.ok()) return quantize.status();
  o.quantize = *quantize;
  auto device_weights = ParseDeviceWeights(absl::GetFlag(FLAGS_weights));
  if (!device_weights.ok()) return device_weights.status();
  o.device_weights = *device_weights;
  o.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  o.max_running = absl::GetFlag(FLAGS_max_running);
  o.max_queue = absl::GetFlag(FLAGS_max_queue);
  o.max_gamma = absl::GetFlag(FLAGS_max_gamma);
  o.default_gamma = absl::GetFlag(FLAGS_default_gamma);
  o.adaptive_gamma = absl::GetFlag(FLAGS_adaptive_gamma);
  o.acceptance_memory = absl::GetFlag(FLAGS_acceptance_memory);
  o.default_max_tokens = absl::GetFlag(FLAGS_default_max_tokens);
  o.drain_timeout_s = absl::GetFlag(FLAGS_drain_timeout_s);
  o.log_level = absl::GetFlag(FLAGS_log_level);
  auto log_format = ParseLogFormat(absl::GetFlag(FLAGS_log_format));
  if (!log_format.ok()) return log_format.status();
  o.log_format = *log_format;
  o.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  o.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  o.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  o.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  o.reflection = absl::GetFlag(FLAGS_reflection);
  o.max_streams_per_client = absl::GetFlag(FLAGS_max_streams_per_client);
  o.max_prompt_bytes = absl::GetFlag(FLAGS_max_prompt_bytes);
  o.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.keepalive_time_s = absl::GetFlag(FLAGS_keepalive_time_s);
  o.keepalive_timeout_s = absl::GetFlag(FLAGS_keepalive_timeout_s);
  o.min_client_ping_interval_s = absl::GetFlag(FLAGS_min_client_ping_interval_s);
  o.max_connection_age_s = absl::GetFlag(FLAGS_max_connection_age_s);
  o.debug_forward_delay_ms = absl::GetFlag(FLAGS_debug_forward_delay_ms);
  if (auto s = o.Validate(); !s.ok()) return s;
  return o;
}

}  // namespace crossreg::server
