#include "engine/model/model_config.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace crossreg {
namespace {

// Generous upper bounds: anything beyond is a corrupt or hostile file.
constexpr int kMaxVocab = 1 << 24;
constexpr int kMaxWidth = 1 << 17;
constexpr int kMaxLayers = 1024;
constexpr int kMaxHeads = 1024;
constexpr int kMaxHeadDim = 1024;
constexpr int kMaxPositions = 1 << 24;

absl::Status OutOfRange(const char* field, double value, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("model config: ", field, " = ", value, " ", why));
}

absl::Status CheckInt(const char* field, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    return OutOfRange(field, value, absl::StrCat("is out of range [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

bool PositiveFinite(float v) { return std::isfinite(v) && v > 0.0f; }

}  // namespace

std::string ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kLlama: return "llama";
    case Architecture::kMistral: return "mistral";
    case Architecture::kQwen2: return "qwen2";
  }
  return "unknown";
}

absl::Status ModelConfig::Validate() const {
  struct IntRange {
    const char* field;
    int value, lo, hi;
  };
  const IntRange ranges[] = {
      {"vocab_size", vocab_size, 1, kMaxVocab},
      {"hidden_size", hidden_size, 1, kMaxWidth},
      {"intermediate_size", intermediate_size, 1, kMaxWidth * 8},
      {"num_layers", num_layers, 1, kMaxLayers},
      {"num_heads", num_heads, 1, kMaxHeads},
      {"num_kv_heads", num_kv_heads, 1, kMaxHeads},
      {"head_dim", head_dim, 2, kMaxHeadDim},
      {"max_position", max_position, 1, kMaxPositions},
  };
  for (const IntRange& r : ranges) {
    if (absl::Status s = CheckInt(r.field, r.value, r.lo, r.hi); !s.ok()) return s;
  }
  if (num_kv_heads > num_heads) {
    return OutOfRange("num_kv_heads", num_kv_heads,
                      absl::StrCat("exceeds num_heads = ", num_heads));
  }
  if (num_heads % num_kv_heads != 0) {
    return OutOfRange("num_heads", num_heads,
                      absl::StrCat("is not a multiple of num_kv_heads = ", num_kv_heads));
  }
  if (head_dim % 2 != 0) return OutOfRange("head_dim", head_dim, "is odd (RoPE rotates pairs)");
  // q/k/v widths are num_heads*head_dim; they must stay within the width bound.
  if (static_cast<int64_t>(num_heads) * head_dim > kMaxWidth) {
    return OutOfRange("head_dim", head_dim,
                      absl::StrCat("times num_heads = ", num_heads, " exceeds ", kMaxWidth));
  }
  if (!PositiveFinite(rms_norm_eps) || rms_norm_eps >= 1.0f) {
    return OutOfRange("rms_norm_eps", rms_norm_eps, "is not in (0, 1)");
  }
  if (!PositiveFinite(rope_theta)) return OutOfRange("rope_theta", rope_theta, "is not positive");
  if (rope_scaling.type != RopeScaling::Type::kNone) {
    if (!PositiveFinite(rope_scaling.factor)) {
      return OutOfRange("rope_scaling.factor", rope_scaling.factor, "is not positive");
    }
  }
  if (rope_scaling.type == RopeScaling::Type::kLlama3) {
    if (!PositiveFinite(rope_scaling.low_freq_factor)) {
      return OutOfRange("rope_scaling.low_freq_factor", rope_scaling.low_freq_factor,
                        "is not positive");
    }
    if (!std::isfinite(rope_scaling.high_freq_factor) ||
        rope_scaling.high_freq_factor <= rope_scaling.low_freq_factor) {
      return OutOfRange("rope_scaling.high_freq_factor", rope_scaling.high_freq_factor,
                        absl::StrCat("must exceed low_freq_factor = ", rope_scaling.low_freq_factor));
    }
    if (absl::Status s = CheckInt("rope_scaling.original_max_position",
                                  rope_scaling.original_max_position, 1, kMaxPositions);
        !s.ok()) {
      return s;
    }
  }
  if (!rope_freq_factors.empty()) {
    if (rope_freq_factors.size() != static_cast<size_t>(head_dim / 2)) {
      return OutOfRange("rope_freq_factors.size", static_cast<double>(rope_freq_factors.size()),
                        absl::StrCat("differs from head_dim / 2 = ", head_dim / 2));
    }
    for (float f : rope_freq_factors) {
      if (!PositiveFinite(f)) return OutOfRange("rope_freq_factors[i]", f, "is not positive");
    }
  }
  if (bos_token_id < -1 || bos_token_id >= vocab_size) {
    return OutOfRange("bos_token_id", bos_token_id,
                      absl::StrCat("is outside the vocabulary [0, ", vocab_size, ")"));
  }
  for (int eos : eos_token_ids) {
    if (eos < 0 || eos >= vocab_size) {
      return OutOfRange("eos_token_ids[i]", eos,
                        absl::StrCat("is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<float> ModelConfig::RopeInverseFrequencies() const {
  const int half = head_dim / 2;
  std::vector<float> inv_freq(half > 0 ? half : 0);
  const double kPi = 3.14159265358979323846;
  for (int i = 0; i < half; ++i) {
    // Computed in double so that large theta (500000, 1e6) keeps full float accuracy.
    double freq = std::pow(static_cast<double>(rope_theta), -2.0 * i / head_dim);
    switch (rope_scaling.type) {
      case RopeScaling::Type::kNone:
        break;
      case RopeScaling::Type::kLinear:
        freq /= rope_scaling.factor;
        break;
      case RopeScaling::Type::kLlama3: {
        // Long wavelengths are stretched by `factor`, short ones kept, and the band
        // between interpolated smoothly (Meta's Llama 3.1 recipe).
        const double old_ctx = rope_scaling.original_max_position;
        const double low = rope_scaling.low_freq_factor;
        const double high = rope_scaling.high_freq_factor;
        const double low_freq_wavelen = old_ctx / low;
        const double high_freq_wavelen = old_ctx / high;
        const double wavelen = 2.0 * kPi / freq;
        if (wavelen < high_freq_wavelen) {
          // high frequency: unchanged
        } else if (wavelen > low_freq_wavelen) {
          freq /= rope_scaling.factor;
        } else {
          const double smooth = (old_ctx / wavelen - low) / (high - low);
          freq = (1.0 - smooth) * freq / rope_scaling.factor + smooth * freq;
        }
        break;
      }
    }
    if (static_cast<size_t>(i) < rope_freq_factors.size()) freq /= rope_freq_factors[i];
    inv_freq[i] = static_cast<float>(freq);
  }
  return inv_freq;
}

}  // namespace crossreg
