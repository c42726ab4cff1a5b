// Writes safetensors files: (name, dtype, shape, bytes) entries, in the given order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace crossreg {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16" — or anything, to test refusals
  std::vector<int64_t> shape;
  std::string bytes;
};

// Header padded with spaces to a multiple of 8 bytes, tensors in the given order.
std::string SerializeSafetensors(const std::vector<SafetensorsEntry>& tensors,
                                 const std::map<std::string, std::string>& metadata = {});
absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsEntry>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Float32 entry from values.
SafetensorsEntry F32Entry(const std::string& name, const std::vector<int64_t>& shape,
                          const std::vector<float>& values);

}  // namespace crossreg
