// Runs one Generate stream and times it.
#pragma once

#include <cstdint>
#include <vector>

#include "clients/loadgen/stream_result.h"
#include "crossreg/v1/generation.grpc.pb.h"

namespace crossreg::clients {

// Blocks until the stream ends; never throws: failures are recorded in the result.
// When `output_ids` is given, the chunks' token ids are appended to it (the next turn
// of a conversation, or the setup call's token pool, is built from them).
StreamResult RunStream(crossreg::v1::Generation::Stub& stub, const crossreg::v1::GenerateRequest& request,
                       std::vector<int32_t>* output_ids = nullptr);

}  // namespace crossreg::clients
