#include "clients/common/names.h"

#include "absl/strings/ascii.h"

namespace crossreg::clients {

using crossreg::v1::DecodingMode;
using crossreg::v1::FinishReason;

absl::StatusOr<DecodingMode> ParseDecodingMode(const std::string& name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "ar") return crossreg::v1::DECODING_MODE_AR;
  if (n == "lossless") return crossreg::v1::DECODING_MODE_LOSSLESS;
  if (n == "lossy") return crossreg::v1::DECODING_MODE_LOSSY;
  if (n == "ngram") return crossreg::v1::DECODING_MODE_NGRAM;
  return absl::InvalidArgumentError("mode '" + name + "' is not one of ar, lossless, lossy, ngram");
}

std::string DecodingModeName(DecodingMode mode) {
  switch (mode) {
    case crossreg::v1::DECODING_MODE_AR: return "ar";
    case crossreg::v1::DECODING_MODE_LOSSLESS: return "lossless";
    case crossreg::v1::DECODING_MODE_LOSSY: return "lossy";
    case crossreg::v1::DECODING_MODE_NGRAM: return "ngram";
    default: return "unspecified";
  }
}

std::string FinishReasonName(FinishReason reason) {
  switch (reason) {
    case crossreg::v1::FINISH_REASON_EOS: return "eos";
    case crossreg::v1::FINISH_REASON_LENGTH: return "length";
    case crossreg::v1::FINISH_REASON_STOP: return "stop";
    case crossreg::v1::FINISH_REASON_CONTEXT: return "context";
    default: return "unspecified";
  }
}

}  // namespace crossreg::clients
