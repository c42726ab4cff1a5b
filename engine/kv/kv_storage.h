// Sizing the K/V storage a backend allocates for a PagedKvCache: one definition for
// every backend, so a memory budget means the same number of tokens on CPU and GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"

namespace crossreg {

// Element type of cached K/V. bf16 halves the cache's memory and the bytes attention
// reads; every control row rounds its K/V the same way whether it was written in this
// forward or earlier, so lossless decoding still equals AR (tested at both types).
enum class KvDtype { kF32, kBf16 };
const char* KvDtypeName(KvDtype dtype);  // "f32", "bf16"
absl::StatusOr<KvDtype> ParseKvDtype(std::string_view name);
// A --kv_dtype flag: "f32", "bf16", or "auto" (nullopt: the engine picks, AutoKvDtype in
// engine/runtime/open_engine.h).
absl::StatusOr<std::optional<KvDtype>> ParseKvDtypeChoice(std::string_view name);
const char* KvDtypeChoiceName(const std::optional<KvDtype>& choice);  // "auto" for nullopt

// Bytes one cached token takes: every layer's K and V rows.
int64_t KvBytesPerToken(const ModelConfig& config, KvDtype dtype = KvDtype::kF32);

// Whole blocks of `block_size` tokens that fit in `bytes`.
int64_t KvBlocksForBytes(const ModelConfig& config, int block_size, int64_t bytes, KvDtype dtype = KvDtype::kF32);

}  // namespace crossreg
