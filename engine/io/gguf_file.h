// GGUF v2/v3 reader: metadata key/values and tensor directory over a mapped file.
// Every offset and length is bounds-checked; a corrupt file yields an error naming
// the file, the byte offset and what was being read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/dtype.h"
#include "engine/io/mapped_file.h"
#include "engine/tensor.h"

namespace crossreg {

// One metadata value. Integers of every width are widened to int64/uint64, floats to
// double. Arrays hold their elements in `array` (strings) or the numeric vectors.
struct GgufValue {
  enum class Kind { kUint, kInt, kFloat, kBool, kString, kArray };
  Kind kind = Kind::kUint;
  uint32_t gguf_type = 0;  // the raw GGUF type id, for error messages
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  // Arrays: element GGUF type and the elements, by kind.
  uint32_t array_type = 0;
  std::vector<std::string> array_strings;
  std::vector<double> array_numbers;  // ints and floats alike (exact for |x| < 2^53)
};

class GgufMetadata {
 public:
  const GgufValue* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  // Typed getters: NotFound if absent, InvalidArgument if of another type.
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;  // any integer type
  absl::StatusOr<double> GetFloat(std::string_view key) const;  // float or integer
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<double>> GetNumberArray(std::string_view key) const;

  std::map<std::string, GgufValue, std::less<>>& mutable_values() { return values_; }
  const std::map<std::string, GgufValue, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, GgufValue, std::less<>> values_;
};

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // outermost first (GGUF ne[] reversed)
  uint64_t offset = 0;         // from the start of the data section
  TensorRef ref;               // view into the mapping
};

class GgufFile {
 public:
  // Parses header, metadata and tensor directory. Tensor types other than F32, F16,
  // BF16, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K are refused with their ggml type name.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // The same over bytes already in memory (MappedFile::FromBytes); errors name file->path().
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(std::shared_ptr<MappedFile> file);

  uint32_t version() const { return version_; }
  const GgufMetadata& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  const std::string& path() const { return path_; }
  // Keeps the mapping alive for TensorRefs handed out.
  std::shared_ptr<MappedFile> mapping() const { return file_; }

 private:
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  GgufMetadata metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace crossreg
