// crossreg.v1.Generation on the gRPC callback API: Generate streams through a
// GenerateReactor; GetModelInfo and Abort answer at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "crossreg/v1/generation.grpc.pb.h"
#include "engine/model/model_loader.h"
#include "scheduler/scheduler.h"
#include "server/generate_reactor.h"
#include "server/request_from_proto.h"

namespace crossreg::server {

struct GenerationServiceOptions {
  DecodingEnvironment env;   // env.model: the loaded model's config
  RequestDefaults defaults;
  std::string model_path;
  int adapter_rank = 0;
  int64_t kv_capacity_tokens = 0;
  std::string backend;         // "cpu", "cuda"
  std::string backend_device;  // what it runs on
};

class GenerationService final : public v1::Generation::CallbackService {
 public:
  // `scheduler` and the model behind options.limits must outlive the service.
  GenerationService(Scheduler& scheduler, const GenerationServiceOptions& options);

  // From now on Generate answers UNAVAILABLE; calls already running go on.
  void StartDraining() { draining_.store(true); }

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* call,
                                                           const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* call, const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* info) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* call, const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;

 private:
  Scheduler& scheduler_;
  const GenerationServiceOptions options_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_request_number_{1};
  GenerateContext generate_context_;
};

}  // namespace crossreg::server
