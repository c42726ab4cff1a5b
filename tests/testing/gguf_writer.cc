#include "tests/testing/gguf_writer.h"

#include <stdlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/io/write_file.h"

namespace crossreg::testing {
namespace {

// GGUF metadata value type ids.
constexpr uint32_t kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6,
                   kBool = 7, kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12;

template <typename T>
void Put(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

void PutString(std::string& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out += s;
}

// Writes one number as GGUF scalar `type`.
void PutNumber(std::string& out, uint32_t type, double v, uint64_t u, int64_t i) {
  switch (type) {
    case kU8: Put<uint8_t>(out, static_cast<uint8_t>(u)); break;
    case kI8: Put<int8_t>(out, static_cast<int8_t>(i)); break;
    case kU16: Put<uint16_t>(out, static_cast<uint16_t>(u)); break;
    case kI16: Put<int16_t>(out, static_cast<int16_t>(i)); break;
    case kU32: Put<uint32_t>(out, static_cast<uint32_t>(u)); break;
    case kI32: Put<int32_t>(out, static_cast<int32_t>(i)); break;
    case kF32: Put<float>(out, static_cast<float>(v)); break;
    case kBool: Put<uint8_t>(out, v != 0 ? 1 : 0); break;
    case kU64: Put<uint64_t>(out, u); break;
    case kI64: Put<int64_t>(out, i); break;
    case kF64: Put<double>(out, v); break;
  }
}

void PutValue(std::string& out, const GgufValue& v) {
  Put<uint32_t>(out, v.gguf_type);
  switch (v.gguf_type) {
    case kString: PutString(out, v.s); return;
    case kArray:
      Put<uint32_t>(out, v.array_type);
      if (v.array_type == kString) {
        Put<uint64_t>(out, v.array_strings.size());
        for (const std::string& s : v.array_strings) PutString(out, s);
      } else {
        Put<uint64_t>(out, v.array_numbers.size());
        for (double d : v.array_numbers) {
          // Converting a value outside an integer type's range is undefined (a negative
          // float score to uint64): convert only what fits; the element type picks one.
          const uint64_t u = d >= 0 && d < 0x1p64 ? static_cast<uint64_t>(d) : 0;
          const int64_t i = d >= -0x1p63 && d < 0x1p63 ? static_cast<int64_t>(d) : 0;
          PutNumber(out, v.array_type, d, u, i);
        }
      }
      return;
    case kBool: Put<uint8_t>(out, v.b ? 1 : 0); return;
    case kF32: case kF64: PutNumber(out, v.gguf_type, v.f, 0, 0); return;
    case kU8: case kU16: case kU32: case kU64: PutNumber(out, v.gguf_type, 0, v.u, 0); return;
    default: PutNumber(out, v.gguf_type, 0, 0, v.i); return;
  }
}

GgufValue Scalar(uint32_t type) {
  GgufValue v;
  v.gguf_type = type;
  return v;
}

}  // namespace

GgufWriter GgufWriter::FromFile(const GgufFile& file) {
  GgufWriter w;
  w.version_ = file.version();
  for (const auto& [key, value] : file.metadata().values()) w.SetValue(key, value);
  if (const GgufValue* a = file.metadata().Find("general.alignment")) {
    w.alignment_ = static_cast<uint32_t>(a->u);
  }
  for (const GgufTensorInfo& t : file.tensors()) {
    const uint32_t type = t.dtype == DType::kF32 ? kGgmlF32
                          : t.dtype == DType::kF16 ? kGgmlF16
                                                   : kGgmlBF16;
    w.SetTensor(t.name, type, t.shape,
                std::string(static_cast<const char*>(t.ref.data), t.ref.nbytes()));
  }
  return w;
}

void GgufWriter::SetAlignment(uint32_t alignment) {
  alignment_ = alignment;
  SetUint32("general.alignment", alignment);
}

void GgufWriter::SetValue(const std::string& key, const GgufValue& value) {
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.value = value;
      return;
    }
  }
  entries_.push_back({key, value});
}

void GgufWriter::SetString(const std::string& key, const std::string& value) {
  GgufValue v = Scalar(kString);
  v.kind = GgufValue::Kind::kString;
  v.s = value;
  SetValue(key, v);
}
void GgufWriter::SetUint32(const std::string& key, uint32_t value) {
  GgufValue v = Scalar(kU32);
  v.u = value;
  SetValue(key, v);
}
void GgufWriter::SetInt32(const std::string& key, int32_t value) {
  GgufValue v = Scalar(kI32);
  v.kind = GgufValue::Kind::kInt;
  v.i = value;
  SetValue(key, v);
}
void GgufWriter::SetUint64(const std::string& key, uint64_t value) {
  GgufValue v = Scalar(kU64);
  v.u = value;
  SetValue(key, v);
}
void GgufWriter::SetFloat32(const std::string& key, float value) {
  GgufValue v = Scalar(kF32);
  v.kind = GgufValue::Kind::kFloat;
  v.f = value;
  SetValue(key, v);
}
void GgufWriter::SetBool(const std::string& key, bool value) {
  GgufValue v = Scalar(kBool);
  v.kind = GgufValue::Kind::kBool;
  v.b = value;
  SetValue(key, v);
}
void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& values) {
  GgufValue v = Scalar(kArray);
  v.kind = GgufValue::Kind::kArray;
  v.array_type = kString;
  v.array_strings = values;
  SetValue(key, v);
}
void GgufWriter::SetFloat32Array(const std::string& key, const std::vector<float>& values) {
  GgufValue v = Scalar(kArray);
  v.kind = GgufValue::Kind::kArray;
  v.array_type = kF32;
  v.array_numbers.assign(values.begin(), values.end());
  SetValue(key, v);
}
void GgufWriter::SetInt32Array(const std::string& key, const std::vector<int32_t>& values) {
  GgufValue v = Scalar(kArray);
  v.kind = GgufValue::Kind::kArray;
  v.array_type = kI32;
  v.array_numbers.assign(values.begin(), values.end());
  SetValue(key, v);
}

void GgufWriter::RemoveKey(const std::string& key) {
  std::erase_if(entries_, [&](const Entry& e) { return e.key == key; });
}

void GgufWriter::SetTensor(const std::string& name, uint32_t ggml_type,
                           const std::vector<int64_t>& shape, std::string bytes) {
  for (Tensor& t : tensors_) {
    if (t.name == name) {
      t = {name, ggml_type, shape, std::move(bytes)};
      return;
    }
  }
  tensors_.push_back({name, ggml_type, shape, std::move(bytes)});
}

void GgufWriter::SetTensorF32(const std::string& name, const std::vector<int64_t>& shape,
                              const std::vector<float>& values) {
  SetTensor(name, kGgmlF32, shape,
            std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
}

void GgufWriter::RemoveTensor(const std::string& name) {
  std::erase_if(tensors_, [&](const Tensor& t) { return t.name == name; });
}

bool GgufWriter::HasTensor(const std::string& name) const {
  for (const Tensor& t : tensors_) {
    if (t.name == name) return true;
  }
  return false;
}

std::string GgufWriter::Serialize() const {
  std::string out = "GGUF";
  Put<uint32_t>(out, version_);
  Put<uint64_t>(out, tensors_.size());
  Put<uint64_t>(out, entries_.size());
  for (const Entry& e : entries_) {
    PutString(out, e.key);
    PutValue(out, e.value);
  }
  auto align = [&](uint64_t n) { return (n + alignment_ - 1) / alignment_ * alignment_; };
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) {
      Put<uint64_t>(out, static_cast<uint64_t>(*it));
    }
    Put<uint32_t>(out, t.ggml_type);
    Put<uint64_t>(out, offset);
    offset = align(offset + t.bytes.size());
  }
  out.resize(align(out.size()), '\0');
  for (const Tensor& t : tensors_) {
    out += t.bytes;
    out.resize(align(out.size()), '\0');
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  return WriteBytes(path, Serialize());
}

absl::Status WriteBytes(const std::string& path, const std::string& bytes) { return WriteFileBytes(path, bytes); }

absl::StatusOr<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// Directories MakeTempDir handed out, removed when the test process exits: tests keep a path in
// a static for the whole suite, so no scope inside a test can own it, and a suite run thousands
// of times must not fill /tmp.
std::mutex& TempDirsMutex() {
  static std::mutex mu;
  return mu;
}
std::vector<std::string>& TempDirs() {
  static auto* dirs = new std::vector<std::string>();
  return *dirs;
}
void RemoveTempDirs() {
  std::lock_guard<std::mutex> lock(TempDirsMutex());
  for (const std::string& dir : TempDirs()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDirs().clear();
}

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = "/tmp/" + prefix + "_XXXXXX";
  char* dir = ::mkdtemp(pattern.data());
  if (dir == nullptr) return std::string();
  static const bool registered = (std::atexit(RemoveTempDirs), true);
  (void)registered;
  std::lock_guard<std::mutex> lock(TempDirsMutex());
  TempDirs().emplace_back(dir);
  return std::string(dir);
}

}  // namespace crossreg::testing
