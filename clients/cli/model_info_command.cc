#include <iostream>

#include <grpcpp/client_context.h>

#include "clients/cli/commands.h"
#include "clients/common/proto_json.h"
#include "clients/common/status_text.h"
#include "crossreg/v1/generation.grpc.pb.h"

namespace crossreg::clients {

int RunModelInfo(const std::shared_ptr<grpc::Channel>& channel, OutputFormat format) {
  auto stub = crossreg::v1::Generation::NewStub(channel);
  grpc::ClientContext context;
  crossreg::v1::ModelInfo info;
  const grpc::Status status = stub->GetModelInfo(&context, crossreg::v1::GetModelInfoRequest(), &info);
  if (!status.ok()) {
    std::cerr << "crossreg: GetModelInfo failed: " << FormatStatus(status) << "\n";
    return 1;
  }
  if (format == OutputFormat::kJsonl) {
    std::cout << ToJsonLine(info) << "\n";
    return 0;
  }
  std::cout << "model:          " << info.model_path() << " (" << info.architecture() << ")\n"
            << "vocab:          " << info.vocab_size() << " tokens, BOS " << info.bos_token_id() << ", EOS "
            << info.eos_token_id() << "\n"
            << "context:        " << info.context_length() << " tokens\n"
            << "shape:          " << info.num_layers() << " layers, hidden " << info.hidden_size() << ", ffn "
            << info.intermediate_size() << ", " << info.num_heads() << " heads (" << info.num_kv_heads()
            << " kv)\n"
            << "adapter:        "
            << (info.has_adapter() ? "yes, rank " + std::to_string(info.adapter_rank())
                                   : std::string("none (lossless and lossy modes unavailable)"))
            << "\n"
            << "gamma:          default " << info.default_gamma() << ", max " << info.max_gamma() << "\n"
            << "kv capacity:    " << info.kv_capacity_tokens() << " tokens\n";
  return 0;
}

}  // namespace crossreg::clients
