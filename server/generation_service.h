// crossreg.v1.Generation on the gRPC callback API, with raw (byte buffer) methods so
// that requests are parsed by ParseRequest (server/request_parsing.h): a malformed
// request gets INVALID_ARGUMENT naming the field. Generate streams through a
// GenerateReactor; GetModelInfo and Abort answer at once. Every method first checks
// the caller's credentials (server/security/call_principal.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "crossreg/v1/generation.grpc.pb.h"
#include "engine/model/model_loader.h"
#include "scheduler/scheduler.h"
#include "server/generate_reactor.h"
#include "server/request_from_proto.h"
#include "server/security/client_stream_limiter.h"
#include "server/security/token_authenticator.h"
#include "server/server_metrics.h"

namespace crossreg::server {

struct GenerationServiceOptions {
  DecodingEnvironment env;   // env.model: the loaded model's config
  RequestDefaults defaults;
  std::string model_path;
  int adapter_rank = 0;
  std::string adapter_draft_layout;  // "chain" or "blocks"; empty without an adapter
  int64_t kv_capacity_tokens = 0;
  std::string backend;         // "cpu", "cuda"
  std::string backend_device;  // what it runs on
  const TokenAuthenticator* tokens = nullptr;  // must outlive the service; null: no auth
  int max_streams_per_client = 0;              // 0: no limit (when stream_limiter is null)
  // Shared with the HTTP front door, so a client's limit counts both; null: the
  // service keeps its own with max_streams_per_client.
  ClientStreamLimiter* stream_limiter = nullptr;
  ServerMetrics* metrics = nullptr;            // null: no metrics
};

using RawGenerationService = v1::Generation::WithRawCallbackMethod_Generate<
    v1::Generation::WithRawCallbackMethod_GetModelInfo<v1::Generation::WithRawCallbackMethod_Abort<v1::Generation::Service>>>;

class GenerationService final : public RawGenerationService {
 public:
  // `scheduler` and the model behind options.env must outlive the service.
  GenerationService(Scheduler& scheduler, const GenerationServiceOptions& options);

  // From now on Generate answers UNAVAILABLE; calls already running go on.
  void StartDraining() { draining_.store(true); }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* call,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* call, const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  // Only the principal that started a request may abort it; for anyone else, as for
  // an unknown id, the answer is NOT_FOUND (which does not reveal that it exists).
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* call, const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;

 private:
  Scheduler& scheduler_;
  const GenerationServiceOptions options_;
  const TokenAuthenticator no_tokens_;
  ClientStreamLimiter stream_limiter_;
  std::atomic<bool> draining_{false};
  GenerateContext generate_context_;
};

}  // namespace crossreg::server
