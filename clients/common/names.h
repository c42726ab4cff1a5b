// Names for the protocol's enums as users type and read them: "lossless", "length".
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "crossreg/v1/generation.pb.h"

namespace crossreg::clients {

// "ar", "lossless", "lossy", "ngram" (any case) -> the enum; anything else is an error
// naming the valid choices.
absl::StatusOr<crossreg::v1::DecodingMode> ParseDecodingMode(const std::string& name);

// The short lower-case name ParseDecodingMode accepts; "unspecified" for 0.
std::string DecodingModeName(crossreg::v1::DecodingMode mode);

// "eos", "length", "stop", "context", "unspecified".
std::string FinishReasonName(crossreg::v1::FinishReason reason);

}  // namespace crossreg::clients
