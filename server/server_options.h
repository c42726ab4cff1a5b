// The server's settings as one typed struct, read once from command-line flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/runtime/open_engine.h"
#include "server/log_format.h"

namespace crossreg::server {

struct ServerOptions {
  std::string model;             // .gguf or HF directory; empty: FindDefaultModel()
  std::string adapter;           // PEFT directory; empty: lossless/lossy refused
  std::string ngram_table;       // corpus n-gram table; empty: the model's own; "none": off
  std::string host = "0.0.0.0";  // all interfaces: the server runs in containers
  int port = 50051;              // gRPC
  int metrics_port = 9090;       // Prometheus /metrics; 0 = off
  int http_port = 8000;          // OpenAI-compatible HTTP front door; 0 = off
  int http_threads = 4;          // HTTP workers; connections cost no thread
  int http_max_connections = 4096;
  int http_max_connections_per_client = 512;   // per IP address
  bool http_ignore_unknown_fields = false;     // false: unknown JSON fields get 400 naming them
  bool expose_model_paths = false;             // GetModelInfo: full paths (admin), else file names
  std::string served_model_name; // the "model" of the HTTP API; empty: the model's file or directory name
  std::string chat_template;     // a Jinja chat template file; empty: the model's own (GGUF or tokenizer_config.json)
  BackendChoice backend = BackendChoice::kAuto;  // cpu, cuda, or auto (CUDA when a device is visible)
  int cuda_device = 0;           // CUDA backend: device ordinal
  int threads = 0;               // CPU backend threads; 0 = one per usable core (cgroup CPU limit)
  int64_t kv_memory_mb = 512;    // K/V memory when kv_blocks is 0
  int kv_blocks = 0;             // exact block count; overrides kv_memory_mb
  int kv_block_size = 16;        // token slots per KV block
  std::optional<KvDtype> kv_dtype;  // K/V element type; unset: auto (AutoKvDtype, engine/runtime/open_engine.h)
  bool prefix_caching = true;    // share full K/V blocks of common prefixes between requests
  DType quantize = DType::kF32;  // quantize the model's matrices at load (kF32: as stored)
  DeviceWeights device_weights = DeviceWeights::kBf16;  // --weights: fp8 on the CUDA backend
  int max_batch_tokens = 512;    // rows per forward
  int max_running = 64;          // sequences decoding at once
  int max_queue = 256;           // waiting requests; more -> RESOURCE_EXHAUSTED
  int max_gamma = 16;            // largest gamma a request may ask for
  int default_gamma = 8;         // gamma when a request leaves it 0
  bool adaptive_gamma = true;    // measure the forward cost curve; speculative requests adapt gamma by default
  bool acceptance_memory = true; // adaptive requests start from what earlier ones of their class saw
  int default_max_tokens = 128;  // max_tokens when a request leaves it unset
  double drain_timeout_s = 30;   // on SIGTERM: how long in-flight calls may run on
  std::string log_level = "info";
  LogFormat log_format = LogFormat::kText;  // text or json lines on stderr

  // Security and limits (docs/security.md).
  std::string tls_cert_file;       // PEM chain; with tls_key_file: serve TLS
  std::string tls_key_file;
  std::string tls_client_ca_file;  // PEM CA bundle: require client certificates (mTLS)
  std::string auth_token_file;     // bearer tokens, "name:token" per line; empty: no auth
  bool reflection = true;          // serve grpc.reflection (behind the tokens when auth is on)
  int max_streams_per_client = 0;  // open Generate streams per principal; 0 = no limit
  int64_t max_prompt_bytes = 0;    // prompt.text bytes; 0 = what could fit the context
  int64_t max_message_bytes = 4 << 20;  // largest request message gRPC accepts
  double keepalive_time_s = 60;    // ping idle connections this often (dead peers are dropped)
  double keepalive_timeout_s = 20; // ... and drop them when a ping is unanswered this long
  double min_client_ping_interval_s = 10;  // clients may ping this often without GOAWAY too_many_pings
  double max_connection_age_s = 0; // close connections (gracefully) after this long, so clients
                                   // re-resolve and spread over new replicas; 0 = never
  int debug_forward_delay_ms = 0;  // sleep before each forward (to watch cancellation by hand); 0 in production

  // Ranges and combinations; the message names the flag.
  absl::Status Validate() const;
  // "host:port" for the gRPC listener.
  std::string GrpcAddress() const;
};

// Parses argv (dashes or underscores in flag names); prints --help and exits like
// any Abseil program. Errors name the flag.
absl::StatusOr<ServerOptions> ParseServerOptions(int argc, char** argv);

}  // namespace crossreg::server
