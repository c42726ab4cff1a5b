// Builds GGUF v3 files in memory for tests: metadata, tensors, and copies of real
// files with keys or tensors changed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/io/gguf_file.h"

namespace crossreg::testing {

// ggml tensor type ids used by tests.
inline constexpr uint32_t kGgmlF32 = 0;
inline constexpr uint32_t kGgmlF16 = 1;
inline constexpr uint32_t kGgmlQ4_0 = 2;
inline constexpr uint32_t kGgmlQ8_0 = 8;
inline constexpr uint32_t kGgmlBF16 = 30;

class GgufWriter {
 public:
  // Copies every metadata entry and tensor (bytes included) of an opened file.
  static GgufWriter FromFile(const GgufFile& file);

  void SetVersion(uint32_t version) { version_ = version; }
  void SetAlignment(uint32_t alignment);  // also writes general.alignment

  void SetString(const std::string& key, const std::string& value);
  void SetUint32(const std::string& key, uint32_t value);
  void SetInt32(const std::string& key, int32_t value);
  void SetUint64(const std::string& key, uint64_t value);
  void SetFloat32(const std::string& key, float value);
  void SetBool(const std::string& key, bool value);
  void SetStringArray(const std::string& key, const std::vector<std::string>& values);
  void SetFloat32Array(const std::string& key, const std::vector<float>& values);
  void SetInt32Array(const std::string& key, const std::vector<int32_t>& values);
  // Any value as read back by GgufFile (keeps its GGUF type).
  void SetValue(const std::string& key, const GgufValue& value);
  void RemoveKey(const std::string& key);

  // `shape` outermost first; `bytes` must hold the tensor's data in `ggml_type`
  // (for quantized types any byte count is accepted as is).
  void SetTensor(const std::string& name, uint32_t ggml_type, const std::vector<int64_t>& shape,
                 std::string bytes);
  void SetTensorF32(const std::string& name, const std::vector<int64_t>& shape,
                    const std::vector<float>& values);
  void RemoveTensor(const std::string& name);
  bool HasTensor(const std::string& name) const;

  std::string Serialize() const;
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    GgufValue value;
  };
  struct Tensor {
    std::string name;
    uint32_t ggml_type = 0;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
  std::vector<Entry> entries_;  // in insertion order
  std::vector<Tensor> tensors_;
};

// Writes `bytes` to `path` (binary, truncating).
absl::Status WriteBytes(const std::string& path, const std::string& bytes);
absl::StatusOr<std::string> ReadBytes(const std::string& path);

// A fresh empty directory under /tmp, removed with its contents when the process exits.
std::string MakeTempDir(const std::string& prefix);

}  // namespace crossreg::testing
