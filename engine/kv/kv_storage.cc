#include "engine/kv/kv_storage.h"

#include "absl/strings/str_cat.h"

namespace crossreg {

const char* KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return "f32";
    case KvDtype::kBf16: return "bf16";
  }
  return "?";
}

absl::StatusOr<KvDtype> ParseKvDtype(std::string_view name) {
  if (name == "f32") return KvDtype::kF32;
  if (name == "bf16") return KvDtype::kBf16;
  return absl::InvalidArgumentError(absl::StrCat("--kv_dtype must be f32 or bf16, got '", std::string(name), "'"));
}

absl::StatusOr<std::optional<KvDtype>> ParseKvDtypeChoice(std::string_view name) {
  if (name == "auto") return std::optional<KvDtype>();
  if (name == "f32") return std::optional<KvDtype>(KvDtype::kF32);
  if (name == "bf16") return std::optional<KvDtype>(KvDtype::kBf16);
  return absl::InvalidArgumentError(
      absl::StrCat("--kv_dtype must be auto, f32 or bf16, got '", std::string(name), "'"));
}

const char* KvDtypeChoiceName(const std::optional<KvDtype>& choice) {
  return choice.has_value() ? KvDtypeName(*choice) : "auto";
}

int64_t KvBytesPerToken(const ModelConfig& config, KvDtype dtype) {
  const int64_t element = dtype == KvDtype::kF32 ? 4 : 2;
  return int64_t{config.num_layers} * 2 * config.kv_dim() * element;
}

int64_t KvBlocksForBytes(const ModelConfig& config, int block_size, int64_t bytes, KvDtype dtype) {
  const int64_t per_block = KvBytesPerToken(config, dtype) * block_size;
  return per_block > 0 ? bytes / per_block : 0;
}

}  // namespace crossreg
