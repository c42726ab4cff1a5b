#include <iostream>

#include <grpcpp/client_context.h>

#include "clients/cli/commands.h"
#include "clients/common/proto_json.h"
#include "clients/common/status_text.h"
#include "crossreg/v1/generation.grpc.pb.h"

namespace crossreg::clients {

int RunAbort(const std::shared_ptr<grpc::Channel>& channel, const std::string& request_id, OutputFormat format) {
  auto stub = crossreg::v1::Generation::NewStub(channel);
  grpc::ClientContext context;
  crossreg::v1::AbortRequest request;
  request.set_request_id(request_id);
  crossreg::v1::AbortResponse response;
  const grpc::Status status = stub->Abort(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "crossreg: Abort failed: " << FormatStatus(status) << "\n";
    return 1;
  }
  if (format == OutputFormat::kJsonl) {
    std::cout << ToJsonLine(response) << "\n";
  } else if (response.found()) {
    std::cout << "aborted request '" << request_id << "'\n";
  } else {
    std::cerr << "crossreg: no live request with id '" << request_id << "' (finished, or never existed)\n";
  }
  return response.found() ? 0 : 1;
}

}  // namespace crossreg::clients
