// Turns a crossreg.v1.GenerateRequest into a scheduler RequestSpec, checking every
// field first. Every refusal names the field by its proto path (e.g.
// "decoding.beta"), so a client can fix the request without reading server logs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "crossreg/v1/generation.pb.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/scheduler.h"

namespace crossreg::server {

// What the loaded model and the server's flags allow.
struct RequestLimits {
  const ModelConfig* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  bool has_adapter = false;
  int32_t placeholder_token = 0;
  int max_gamma = kMaxGamma;
  int default_gamma = 8;
  int default_max_tokens = 128;
  bool can_adapt_gamma = false;     // the server measured its forward cost curve
  bool default_adaptive_gamma = false;
};

struct ValidatedRequest {
  RequestSpec spec;                       // request_id left as given (may be empty)
  std::vector<std::string> stop_strings;  // text stop sequences, handled by the server
};

// INVALID_ARGUMENT naming the field for bad values; FAILED_PRECONDITION for a
// Cross-Regression mode on a server with no adapter.
absl::StatusOr<ValidatedRequest> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                         const RequestLimits& limits);

DecodingMode ToDecodingMode(v1::DecodingMode mode);

}  // namespace crossreg::server
