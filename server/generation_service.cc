#include "server/generation_service.h"

#include "engine/model/model_config.h"

namespace crossreg::server {

GenerationService::GenerationService(Scheduler& scheduler, const GenerationServiceOptions& options)
    : scheduler_(scheduler), options_(options) {
  generate_context_.scheduler = &scheduler_;
  generate_context_.env = options_.env;
  generate_context_.defaults = options_.defaults;
  generate_context_.draining = &draining_;
  generate_context_.next_request_number = &next_request_number_;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* GenerationService::Generate(grpc::CallbackServerContext* call,
                                                                            const v1::GenerateRequest* request) {
  return GenerateReactor::Start(generate_context_, call, *request);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* call,
                                                          const v1::GetModelInfoRequest* /*request*/,
                                                          v1::ModelInfo* info) {
  const ModelConfig& config = *options_.env.model;
  info->set_architecture(ArchitectureName(config.arch));
  info->set_model_path(options_.model_path);
  info->set_vocab_size(config.vocab_size);
  info->set_context_length(config.max_position);
  info->set_num_layers(config.num_layers);
  info->set_hidden_size(config.hidden_size);
  info->set_intermediate_size(config.intermediate_size);
  info->set_num_heads(config.num_heads);
  info->set_num_kv_heads(config.num_kv_heads);
  info->set_has_adapter(options_.env.has_adapter);
  info->set_adapter_rank(options_.adapter_rank);
  info->set_max_gamma(options_.env.max_gamma);
  info->set_default_gamma(options_.defaults.gamma);
  info->set_kv_capacity_tokens(options_.kv_capacity_tokens);
  info->set_bos_token_id(config.bos_token_id);
  info->set_eos_token_id(config.eos_token_ids.empty() ? -1 : config.eos_token_ids.front());
  info->set_backend(options_.backend);
  info->set_backend_device(options_.backend_device);
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GenerationService::Abort(grpc::CallbackServerContext* call, const v1::AbortRequest* request,
                                                   v1::AbortResponse* response) {
  grpc::ServerUnaryReactor* reactor = call->DefaultReactor();
  if (request->request_id().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id: empty"));
    return reactor;
  }
  response->set_found(
      scheduler_.Abort(request->request_id(), absl::CancelledError("aborted by an Abort call")));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace crossreg::server
