#include "engine/io/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"

namespace crossreg {
namespace {

using json = nlohmann::json;

absl::Status Corrupt(const std::string& path, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

absl::StatusOr<DType> DTypeFromName(const std::string& name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported dtype ", name, " (supported: F32, F16, BF16)"));
}

// Reads a JSON array of non-negative integers that fit in int64.
bool ReadIndexArray(const json& j, std::vector<int64_t>& out) {
  if (!j.is_array()) return false;
  out.clear();
  for (const json& e : j) {
    if (!e.is_number_unsigned()) return false;
    const uint64_t v = e.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out.push_back(static_cast<int64_t>(v));
  }
  return true;
}

// Parses one header entry into `ref`; `data` is the start of the byte buffer.
absl::Status ParseTensorEntry(const std::string& path, const std::string& name,
                              const json& entry, const unsigned char* data,
                              uint64_t data_size, TensorRef& ref) {
  const std::string where = absl::StrCat("tensor '", name, "'");
  if (!entry.is_object()) return Corrupt(path, absl::StrCat(where, " header entry is not an object"));
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return Corrupt(path, absl::StrCat(where, " has no string 'dtype'"));
  }
  auto dtype = DTypeFromName(dtype_it->get<std::string>());
  if (!dtype.ok()) return Corrupt(path, absl::StrCat(where, ": ", dtype.status().message()));
  ref.dtype = *dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !ReadIndexArray(*shape_it, ref.shape)) {
    return Corrupt(path, absl::StrCat(where, " has no valid 'shape' (array of non-negative integers)"));
  }
  std::vector<int64_t> offsets;
  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end() || !ReadIndexArray(*offsets_it, offsets) || offsets.size() != 2) {
    return Corrupt(path, absl::StrCat(where, " has no valid 'data_offsets' ([begin, end])"));
  }
  const uint64_t begin = static_cast<uint64_t>(offsets[0]);
  const uint64_t end = static_cast<uint64_t>(offsets[1]);
  if (begin > end || end > data_size) {
    return Corrupt(path, absl::StrCat(where, " data_offsets [", begin, ", ", end,
                                      "] lie outside the data section (", data_size,
                                      " bytes); file truncated?"));
  }
  // Element count, guarding against overflow of the shape product.
  uint64_t numel = 1;
  for (int64_t d : ref.shape) {
    const uint64_t ud = static_cast<uint64_t>(d);
    if (ud != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / ud) {
      return Corrupt(path, absl::StrCat(where, " shape ", ShapeString(ref.shape), " overflows"));
    }
    numel *= ud;
  }
  const uint64_t expected = numel * DTypeSize(ref.dtype);
  if (expected != end - begin) {
    return Corrupt(path, absl::StrCat(where, " shape ", ShapeString(ref.shape), " of ",
                                      std::string(DTypeName(ref.dtype)), " needs ", expected,
                                      " bytes but data_offsets span ", end - begin));
  }
  const unsigned char* p = data + begin;
  if (reinterpret_cast<uintptr_t>(p) % DTypeSize(ref.dtype) != 0) {
    return Corrupt(path, absl::StrCat(where, " data is misaligned for ",
                                      std::string(DTypeName(ref.dtype))));
  }
  ref.data = p;
  return absl::OkStatus();
}

absl::StatusOr<json> ReadJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  const char* begin = reinterpret_cast<const char*>(file->data());
  json j = json::parse(begin, begin + file->size(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt(path, "is not valid JSON");
  return j;
}

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mapping, MappedFile::Open(path));
  return Parse(std::move(mapping));
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(
    std::shared_ptr<MappedFile> mapping) {
  const std::string& path = mapping->path();
  const uint64_t size = mapping->size();
  if (size < 8) {
    return Corrupt(path, absl::StrCat("file truncated (", size,
                                      " bytes) while reading the 8-byte header length"));
  }
  uint64_t header_len;
  std::memcpy(&header_len, mapping->data(), 8);
  if (header_len > size - 8) {
    return Corrupt(path, absl::StrCat("file truncated: header length ", header_len,
                                      " exceeds the ", size - 8, " bytes after it"));
  }
  const char* header = reinterpret_cast<const char*>(mapping->data() + 8);
  json j = json::parse(header, header + header_len, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt(path, "header is not valid JSON");
  if (!j.is_object()) return Corrupt(path, "header is not a JSON object");

  auto file = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  file->file_ = mapping;
  const unsigned char* data = mapping->data() + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return Corrupt(path, "__metadata__ is not an object");
      continue;
    }
    TensorRef ref;
    RETURN_IF_ERROR(ParseTensorEntry(path, name, entry, data, data_size, ref));
    file->tensors_.emplace(name, std::move(ref));
  }
  return file;
}

const TensorRef* SafetensorsFile::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> SafetensorsCheckpoint::OpenDirectory(
    const std::string& dir) {
  auto ckpt = std::unique_ptr<SafetensorsCheckpoint>(new SafetensorsCheckpoint());
  const std::string index_path = dir + "/model.safetensors.index.json";

  if (IsRegularFile(index_path)) {
    ASSIGN_OR_RETURN(json index, ReadJsonFile(index_path));
    if (!index.is_object()) return Corrupt(index_path, "is not a JSON object");
    auto map_it = index.find("weight_map");
    if (map_it == index.end() || !map_it->is_object()) {
      return Corrupt(index_path, "has no object 'weight_map'");
    }
    std::map<std::string, SafetensorsFile*> shards;  // file name -> opened shard
    for (const auto& [name, shard] : map_it->items()) {
      if (!shard.is_string()) {
        return Corrupt(index_path, absl::StrCat("weight_map entry '", name, "' is not a string"));
      }
      const std::string shard_name = shard.get<std::string>();
      // Shards live beside the index; refuse paths that would escape the directory.
      if (shard_name.empty() || shard_name.find('/') != std::string::npos ||
          shard_name == "." || shard_name == "..") {
        return Corrupt(index_path, absl::StrCat("weight_map entry '", name,
                                                "' names an invalid shard file '", shard_name, "'"));
      }
      auto it = shards.find(shard_name);
      if (it == shards.end()) {
        ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> opened,
                         SafetensorsFile::Open(dir + "/" + shard_name));
        it = shards.emplace(shard_name, opened.get()).first;
        ckpt->files_.push_back(std::move(opened));
      }
      const TensorRef* ref = it->second->Find(name);
      if (ref == nullptr) {
        return Corrupt(index_path, absl::StrCat("tensor '", name, "' is listed in shard '",
                                                shard_name, "' but that file does not contain it"));
      }
      ckpt->index_.emplace(name, ref);
    }
    return ckpt;
  }

  std::vector<std::string> paths;
  if (IsRegularFile(dir + "/model.safetensors")) {
    paths.push_back(dir + "/model.safetensors");
  } else {
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) return absl::NotFoundError(absl::StrCat("cannot list directory ", dir, ": ", ec.message()));
    for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
      if (ec) break;
      const std::filesystem::path& p = it->path();
      if (p.extension() == ".safetensors" && IsRegularFile(p.string())) paths.push_back(p.string());
    }
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) {
    return absl::NotFoundError(absl::StrCat(dir, ": no model.safetensors.index.json, ",
                                            "model.safetensors or *.safetensors files"));
  }
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    for (const auto& [name, ref] : file->tensors()) {
      if (!ckpt->index_.emplace(name, &ref).second) {
        return Corrupt(path, absl::StrCat("tensor '", name, "' also appears in another shard"));
      }
    }
    ckpt->files_.push_back(std::move(file));
  }
  return ckpt;
}

const TensorRef* SafetensorsCheckpoint::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<std::string> SafetensorsCheckpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(index_.size());
  for (const auto& [name, ref] : index_) names.push_back(name);
  return names;
}

std::vector<std::shared_ptr<const void>> SafetensorsCheckpoint::Storage() const {
  std::vector<std::shared_ptr<const void>> storage;
  for (const auto& file : files_) storage.push_back(file->mapping());
  return storage;
}

}  // namespace crossreg
