// Per-request decoding choice: AR, Cross-Regression (lossless or lossy), or
// prompt-lookup (n-gram) drafting. All speculative modes verify through one path.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace crossreg {

enum class DecodingMode { kAutoregressive, kLossless, kLossy, kNgram };
const char* DecodingModeName(DecodingMode m);  // "ar", "lossless", "lossy", "ngram"
absl::StatusOr<DecodingMode> ParseDecodingMode(const std::string& name);

struct DecodingConfig {
  DecodingMode mode = DecodingMode::kAutoregressive;
  int gamma = 8;       // predictive rows (draft slots) per forward
  float beta = 0.0f;   // EMA weight of earlier energies, [0, 1); lossy only
  float tau = 0.0f;    // acceptance offset in nats, <= 0; lossy only
  int ngram_max = 3;   // n-gram mode: longest suffix matched
};

// The engine's limit on gamma (draft slots per sequence and forward).
inline constexpr int kMaxGamma = 64;

// Ranges and combinations; messages name the field (beta, tau, gamma, mode).
// `has_adapter`: Cross-Regression modes need a predictive-stream adapter.
absl::Status ValidateDecodingConfig(const DecodingConfig& config, int max_gamma, bool has_adapter);

}  // namespace crossreg
