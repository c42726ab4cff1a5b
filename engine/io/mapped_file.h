// A read-only memory mapping of a whole file (RAII), or an in-memory copy of bytes
// with the same interface, so that every parser has one entry point for both.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace crossreg {

class MappedFile {
 public:
  static absl::StatusOr<std::shared_ptr<MappedFile>> Open(const std::string& path);
  // A copy of `bytes` that parsers read as the file `name` (fuzzers, tests). The copy is
  // 16-byte aligned, so alignment checks see what a page-aligned mapping would give.
  static std::shared_ptr<MappedFile> FromBytes(std::string name, std::string_view bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const unsigned char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<unsigned char[]> owned_;  // FromBytes: the copy; data_ points into it
};

}  // namespace crossreg
