// safetensors reader (one file) and sharded checkpoints (model.safetensors.index.json).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/io/mapped_file.h"
#include "engine/tensor.h"

namespace crossreg {

class SafetensorsFile {
 public:
  // Validates the JSON header, dtypes (F32/F16/BF16), shapes against byte ranges,
  // and that ranges lie inside the file.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // The same over bytes already in memory (MappedFile::FromBytes); errors name file->path().
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Parse(std::shared_ptr<MappedFile> file);

  const std::map<std::string, TensorRef, std::less<>>& tensors() const { return tensors_; }
  const TensorRef* Find(std::string_view name) const;
  std::shared_ptr<MappedFile> mapping() const { return file_; }

 private:
  std::shared_ptr<MappedFile> file_;
  std::map<std::string, TensorRef, std::less<>> tensors_;
};

// All tensors of a checkpoint directory: `model.safetensors`, or the shards listed in
// `model.safetensors.index.json`, or every `*.safetensors` file in the directory.
class SafetensorsCheckpoint {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> OpenDirectory(
      const std::string& dir);
  const TensorRef* Find(std::string_view name) const;
  std::vector<std::string> Names() const;
  // Mappings that must outlive the TensorRefs.
  std::vector<std::shared_ptr<const void>> Storage() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorRef*, std::less<>> index_;
};

}  // namespace crossreg
