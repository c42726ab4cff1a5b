#include "server/generation_service.h"

#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "engine/model/model_config.h"
#include "scheduler/cancel_cause.h"
#include "server/grpc_status.h"
#include "server/request_parsing.h"
#include "server/security/call_principal.h"

namespace crossreg::server {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* call, ServerMetrics* metrics, const char* method,
                                 const absl::Status& status) {
  if (metrics != nullptr) metrics->OnGrpcCall(method, static_cast<int>(status.code()));
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

GenerationService::GenerationService(Scheduler& scheduler, const GenerationServiceOptions& options)
    : scheduler_(scheduler), options_(options), stream_limiter_(options.max_streams_per_client) {
  generate_context_.scheduler = &scheduler_;
  generate_context_.env = options_.env;
  generate_context_.defaults = options_.defaults;
  generate_context_.draining = &draining_;
  generate_context_.tokens = options_.tokens != nullptr ? options_.tokens : &no_tokens_;
  generate_context_.stream_limiter = options_.stream_limiter != nullptr ? options_.stream_limiter : &stream_limiter_;
  generate_context_.metrics = options_.metrics;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(grpc::CallbackServerContext* call,
                                                                        const grpc::ByteBuffer* request) {
  return GenerateReactor::Start(generate_context_, call, *request);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* call,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  if (auto principal = CallPrincipal(*call, *generate_context_.tokens); !principal.ok()) {
    return Finish(call, options_.metrics, "GetModelInfo", principal.status());
  }
  v1::GetModelInfoRequest parsed;
  if (absl::Status s = ParseRequest(*request, parsed); !s.ok()) return Finish(call, options_.metrics, "GetModelInfo", s);
  const ModelConfig& config = *options_.env.model;
  v1::ModelInfo info;
  info.set_architecture(ArchitectureName(config.arch));
  info.set_model_path(options_.model_path);
  info.set_vocab_size(config.vocab_size);
  info.set_context_length(config.max_position);
  info.set_num_layers(config.num_layers);
  info.set_hidden_size(config.hidden_size);
  info.set_intermediate_size(config.intermediate_size);
  info.set_num_heads(config.num_heads);
  info.set_num_kv_heads(config.num_kv_heads);
  info.set_has_adapter(options_.env.has_adapter);
  info.set_adapter_rank(options_.adapter_rank);
  info.set_adapter_draft_layout(options_.adapter_draft_layout);
  info.set_max_gamma(options_.env.max_gamma);
  info.set_default_gamma(options_.defaults.gamma);
  info.set_kv_capacity_tokens(options_.kv_capacity_tokens);
  info.set_bos_token_id(config.bos_token_id);
  info.set_eos_token_id(config.eos_token_ids.empty() ? -1 : config.eos_token_ids.front());
  info.set_backend(options_.backend);
  info.set_backend_device(options_.backend_device);
  *response = SerializeResponse(info);
  return Finish(call, options_.metrics, "GetModelInfo", absl::OkStatus());
}

grpc::ServerUnaryReactor* GenerationService::Abort(grpc::CallbackServerContext* call, const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  auto principal = CallPrincipal(*call, *generate_context_.tokens);
  if (!principal.ok()) return Finish(call, options_.metrics, "Abort", principal.status());
  v1::AbortRequest parsed;
  if (absl::Status s = ParseRequest(*request, parsed); !s.ok()) return Finish(call, options_.metrics, "Abort", s);
  if (parsed.request_id().empty()) return Finish(call, options_.metrics, "Abort", FieldViolation("request_id", "empty"));
  if (!scheduler_.Abort(parsed.request_id(), CancelledBecause(CancelCause::kOwnerAbort, "aborted by an Abort call"), *principal)) {
    return Finish(call, options_.metrics, "Abort", absl::NotFoundError("request_id: no live request with this id from this client (finished, "
                                            "never started, or started with other credentials)"));
  }
  v1::AbortResponse answer;
  answer.set_found(true);
  *response = SerializeResponse(answer);
  return Finish(call, options_.metrics, "Abort", absl::OkStatus());
}

}  // namespace crossreg::server
