// Runs one Generate stream and times it.
#pragma once

#include "clients/loadgen/stream_result.h"
#include "crossreg/v1/generation.grpc.pb.h"

namespace crossreg::clients {

// Blocks until the stream ends; never throws: failures are recorded in the result.
StreamResult RunStream(crossreg::v1::Generation::Stub& stub, const crossreg::v1::GenerateRequest& request);

}  // namespace crossreg::clients
