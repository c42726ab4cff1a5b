#include "engine/io/gguf_file.h"

#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/status_macros.h"

namespace crossreg {
namespace {

// GGUF metadata value type ids.
enum GgufType : uint32_t {
  kTypeU8 = 0, kTypeI8 = 1, kTypeU16 = 2, kTypeI16 = 3, kTypeU32 = 4, kTypeI32 = 5,
  kTypeF32 = 6, kTypeBool = 7, kTypeString = 8, kTypeArray = 9, kTypeU64 = 10,
  kTypeI64 = 11, kTypeF64 = 12,
};

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
// A key or tensor name longer than this is corruption, not data.
constexpr uint64_t kMaxNameLength = 1 << 16;

const char* GgufTypeName(uint32_t type) {
  switch (type) {
    case kTypeU8: return "u8";
    case kTypeI8: return "i8";
    case kTypeU16: return "u16";
    case kTypeI16: return "i16";
    case kTypeU32: return "u32";
    case kTypeI32: return "i32";
    case kTypeF32: return "f32";
    case kTypeBool: return "bool";
    case kTypeString: return "string";
    case kTypeArray: return "array";
    case kTypeU64: return "u64";
    case kTypeI64: return "i64";
    case kTypeF64: return "f64";
  }
  return "unknown";
}

// Fixed size in bytes of a scalar GGUF value type; 0 for string/array/unknown.
size_t ScalarSize(uint32_t type) {
  switch (type) {
    case kTypeU8: case kTypeI8: case kTypeBool: return 1;
    case kTypeU16: case kTypeI16: return 2;
    case kTypeU32: case kTypeI32: case kTypeF32: return 4;
    case kTypeU64: case kTypeI64: case kTypeF64: return 8;
  }
  return 0;
}

const char* GgmlTypeName(uint32_t type) {
  static constexpr std::pair<uint32_t, const char*> kNames[] = {
      {0, "F32"},      {1, "F16"},      {2, "Q4_0"},    {3, "Q4_1"},    {6, "Q5_0"},
      {7, "Q5_1"},     {8, "Q8_0"},     {9, "Q8_1"},    {10, "Q2_K"},   {11, "Q3_K"},
      {12, "Q4_K"},    {13, "Q5_K"},    {14, "Q6_K"},   {15, "Q8_K"},   {16, "IQ2_XXS"},
      {17, "IQ2_XS"},  {18, "IQ3_XXS"}, {19, "IQ1_S"},  {20, "IQ4_NL"}, {21, "IQ3_S"},
      {22, "IQ2_S"},   {23, "IQ4_XS"},  {24, "I8"},     {25, "I16"},    {26, "I32"},
      {27, "I64"},     {28, "F64"},     {29, "IQ1_M"},  {30, "BF16"},   {34, "TQ1_0"},
      {35, "TQ2_0"},
  };
  for (const auto& [id, name] : kNames) {
    if (id == type) return name;
  }
  return "unknown";
}

// Little-endian cursor over the mapped bytes. Every read checks the remaining length
// first, so a truncated file is an error naming the offset and the field.
class ByteReader {
 public:
  ByteReader(const std::string& path, const unsigned char* data, size_t size)
      : path_(path), data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  absl::Status Error(absl::string_view what, absl::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", problem, " while reading ", what, " at byte offset ", pos_));
  }

  absl::Status Need(uint64_t n, absl::string_view what) const {
    if (n > remaining()) {
      return Error(what, absl::StrCat("file truncated (need ", n, " bytes, ", remaining(),
                                      " left)"));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    RETURN_IF_ERROR(Need(sizeof(T), what));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // host is little endian (x86/arm64)
    pos_ += sizeof(T);
    return v;
  }

  absl::StatusOr<std::string> ReadString(absl::string_view what,
                                         uint64_t max_len = std::numeric_limits<uint64_t>::max()) {
    ASSIGN_OR_RETURN(uint64_t len, Read<uint64_t>(what));
    if (len > max_len) {
      pos_ -= sizeof(uint64_t);
      return Error(what, absl::StrCat("implausible string length ", len));
    }
    if (len > remaining()) {
      pos_ -= sizeof(uint64_t);
      return Error(what, absl::StrCat("file truncated (string of ", len, " bytes, ",
                                      remaining() - sizeof(uint64_t), " left)"));
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const std::string& path_;
  const unsigned char* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Reads one scalar of `type` into `out` (kind and widened value).
absl::Status ReadScalar(ByteReader& r, uint32_t type, absl::string_view what, GgufValue& out) {
  switch (type) {
    case kTypeU8: { ASSIGN_OR_RETURN(auto v, r.Read<uint8_t>(what)); out.kind = GgufValue::Kind::kUint; out.u = v; break; }
    case kTypeU16: { ASSIGN_OR_RETURN(auto v, r.Read<uint16_t>(what)); out.kind = GgufValue::Kind::kUint; out.u = v; break; }
    case kTypeU32: { ASSIGN_OR_RETURN(auto v, r.Read<uint32_t>(what)); out.kind = GgufValue::Kind::kUint; out.u = v; break; }
    case kTypeU64: { ASSIGN_OR_RETURN(auto v, r.Read<uint64_t>(what)); out.kind = GgufValue::Kind::kUint; out.u = v; break; }
    case kTypeI8: { ASSIGN_OR_RETURN(auto v, r.Read<int8_t>(what)); out.kind = GgufValue::Kind::kInt; out.i = v; break; }
    case kTypeI16: { ASSIGN_OR_RETURN(auto v, r.Read<int16_t>(what)); out.kind = GgufValue::Kind::kInt; out.i = v; break; }
    case kTypeI32: { ASSIGN_OR_RETURN(auto v, r.Read<int32_t>(what)); out.kind = GgufValue::Kind::kInt; out.i = v; break; }
    case kTypeI64: { ASSIGN_OR_RETURN(auto v, r.Read<int64_t>(what)); out.kind = GgufValue::Kind::kInt; out.i = v; break; }
    case kTypeF32: { ASSIGN_OR_RETURN(auto v, r.Read<float>(what)); out.kind = GgufValue::Kind::kFloat; out.f = v; break; }
    case kTypeF64: { ASSIGN_OR_RETURN(auto v, r.Read<double>(what)); out.kind = GgufValue::Kind::kFloat; out.f = v; break; }
    case kTypeBool: {
      ASSIGN_OR_RETURN(auto v, r.Read<uint8_t>(what));
      if (v > 1) return r.Error(what, absl::StrCat("invalid bool value ", int{v}));
      out.kind = GgufValue::Kind::kBool;
      out.b = v != 0;
      break;
    }
    default:
      return r.Error(what, absl::StrCat("unknown value type ", type));
  }
  return absl::OkStatus();
}

double ScalarAsNumber(const GgufValue& v) {
  switch (v.kind) {
    case GgufValue::Kind::kUint: return static_cast<double>(v.u);
    case GgufValue::Kind::kInt: return static_cast<double>(v.i);
    case GgufValue::Kind::kFloat: return v.f;
    case GgufValue::Kind::kBool: return v.b ? 1.0 : 0.0;
    default: return 0.0;
  }
}

absl::StatusOr<GgufValue> ReadValue(ByteReader& r, const std::string& key) {
  const std::string what = absl::StrCat("value of key '", key, "'");
  GgufValue value;
  ASSIGN_OR_RETURN(value.gguf_type, r.Read<uint32_t>(absl::StrCat("type of key '", key, "'")));
  if (value.gguf_type == kTypeString) {
    value.kind = GgufValue::Kind::kString;
    ASSIGN_OR_RETURN(value.s, r.ReadString(what));
    return value;
  }
  if (value.gguf_type != kTypeArray) {
    RETURN_IF_ERROR(ReadScalar(r, value.gguf_type, what, value));
    return value;
  }
  value.kind = GgufValue::Kind::kArray;
  ASSIGN_OR_RETURN(value.array_type, r.Read<uint32_t>(absl::StrCat("array type of key '", key, "'")));
  const std::string count_what = absl::StrCat("array length of key '", key, "'");
  ASSIGN_OR_RETURN(uint64_t count, r.Read<uint64_t>(count_what));
  const std::string elem_what = absl::StrCat("array element of key '", key, "'");
  if (value.array_type == kTypeString) {
    // Each string costs at least its 8-byte length: bound the count before reserving.
    if (count > r.remaining() / sizeof(uint64_t)) {
      return r.Error(count_what, absl::StrCat("file truncated (", count,
                                              " strings cannot fit in ", r.remaining(),
                                              " bytes)"));
    }
    value.array_strings.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(std::string s, r.ReadString(elem_what));
      value.array_strings.push_back(std::move(s));
    }
    return value;
  }
  const size_t elem_size = ScalarSize(value.array_type);
  if (elem_size == 0) {
    return r.Error(count_what, absl::StrCat("unsupported array element type ", value.array_type,
                                            " (", GgufTypeName(value.array_type), ")"));
  }
  if (count > r.remaining() / elem_size) {
    return r.Error(count_what, absl::StrCat("file truncated (", count, " elements of ",
                                            elem_size, " bytes, ", r.remaining(), " left)"));
  }
  value.array_numbers.reserve(static_cast<size_t>(count));
  GgufValue elem;
  for (uint64_t i = 0; i < count; ++i) {
    RETURN_IF_ERROR(ReadScalar(r, value.array_type, elem_what, elem));
    value.array_numbers.push_back(ScalarAsNumber(elem));
  }
  return value;
}

absl::StatusOr<DType> DTypeFromGgml(uint32_t type, const std::string& path,
                                    const std::string& tensor) {
  switch (type) {
    case 0: return DType::kF32;
    case 1: return DType::kF16;
    case 30: return DType::kBF16;
    case 8: return DType::kQ8_0;
    case 2: return DType::kQ4_0;
    case 12: return DType::kQ4_K;
    case 13: return DType::kQ5_K;
    case 14: return DType::kQ6_K;
    case 3: return DType::kQ4_1;
    case 6: return DType::kQ5_0;
    case 7: return DType::kQ5_1;
    case 10: return DType::kQ2_K;
    case 11: return DType::kQ3_K;
    case 20: return DType::kIQ4_NL;
    case 23: return DType::kIQ4_XS;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": tensor '", tensor, "' has unsupported ggml type ", type, " (", GgmlTypeName(type),
      "); supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, "
      "IQ4_XS (the types of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K, "
      "IQ4_NL and IQ4_XS files)"));
}

// Reads one tensor directory entry; data range is checked later, once the data
// section's start is known.
absl::StatusOr<GgufTensorInfo> ReadTensorInfo(ByteReader& r, const std::string& path,
                                              uint64_t index) {
  GgufTensorInfo info;
  const std::string entry = absl::StrCat("tensor info #", index);
  ASSIGN_OR_RETURN(info.name, r.ReadString(absl::StrCat("name of ", entry), kMaxNameLength));
  const std::string named = absl::StrCat(entry, " ('", info.name, "')");
  const std::string dims_what = absl::StrCat("n_dims of ", named);
  ASSIGN_OR_RETURN(uint32_t n_dims, r.Read<uint32_t>(dims_what));
  if (n_dims == 0 || n_dims > kMaxDims) {
    return r.Error(dims_what, absl::StrCat("n_dims ", n_dims, " out of range [1, ", kMaxDims, "]"));
  }
  std::vector<int64_t> ne(n_dims);
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const std::string what = absl::StrCat("dimension ", d, " of ", named);
    ASSIGN_OR_RETURN(uint64_t n, r.Read<uint64_t>(what));
    if (n == 0 || n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n) {
      return r.Error(what, absl::StrCat("invalid or overflowing dimension ", n));
    }
    numel *= n;
    ne[d] = static_cast<int64_t>(n);
  }
  info.shape.assign(ne.rbegin(), ne.rend());  // ggml ne[0] is innermost
  ASSIGN_OR_RETURN(uint32_t ggml_type, r.Read<uint32_t>(absl::StrCat("type of ", named)));
  ASSIGN_OR_RETURN(info.dtype, DTypeFromGgml(ggml_type, path, info.name));
  ASSIGN_OR_RETURN(info.offset, r.Read<uint64_t>(absl::StrCat("data offset of ", named)));
  if (numel > std::numeric_limits<uint64_t>::max() / 8) {
    return r.Error(named, "tensor size overflows");
  }
  // A quantized tensor's rows are whole blocks (ggml's own rule): a row that ended
  // inside a block could not be read or multiplied row by row.
  const int64_t block = DTypeBlockElements(info.dtype);
  if (ne[0] % block != 0) {
    return r.Error(named, absl::StrCat("its rows of ", ne[0], " elements are not a whole number of ",
                                       std::string(DTypeName(info.dtype)), " blocks (", block, " elements each)"));
  }
  info.ref.dtype = info.dtype;
  info.ref.shape = info.shape;
  return info;
}

}  // namespace

const GgufValue* GgufMetadata::Find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

namespace {

absl::Status WrongType(std::string_view key, const GgufValue& v, const char* expected) {
  std::string actual(GgufTypeName(v.gguf_type));
  if (v.kind == GgufValue::Kind::kArray) {
    absl::StrAppend(&actual, " of ", GgufTypeName(v.array_type));
  }
  return absl::InvalidArgumentError(absl::StrCat("GGUF metadata key '", std::string(key), "' has type ",
                                                 actual, ", expected ", expected));
}

absl::Status Missing(std::string_view key) {
  return absl::NotFoundError(absl::StrCat("GGUF metadata key '", std::string(key), "' not found"));
}

}  // namespace

absl::StatusOr<std::string> GgufMetadata::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->kind != GgufValue::Kind::kString) return WrongType(key, *v, "string");
  return v->s;
}

absl::StatusOr<int64_t> GgufMetadata::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->kind == GgufValue::Kind::kInt) return v->i;
  if (v->kind == GgufValue::Kind::kUint) {
    if (v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF metadata key '", std::string(key), "' value ", v->u, " is out of range"));
    }
    return static_cast<int64_t>(v->u);
  }
  return WrongType(key, *v, "integer");
}

absl::StatusOr<double> GgufMetadata::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  switch (v->kind) {
    case GgufValue::Kind::kFloat: return v->f;
    case GgufValue::Kind::kInt: return static_cast<double>(v->i);
    case GgufValue::Kind::kUint: return static_cast<double>(v->u);
    default: return WrongType(key, *v, "number");
  }
}

absl::StatusOr<bool> GgufMetadata::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->kind != GgufValue::Kind::kBool) return WrongType(key, *v, "bool");
  return v->b;
}

absl::StatusOr<std::vector<std::string>> GgufMetadata::GetStringArray(
    std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->kind != GgufValue::Kind::kArray || v->array_type != kTypeString) {
    return WrongType(key, *v, "array of string");
  }
  return v->array_strings;
}

absl::StatusOr<std::vector<double>> GgufMetadata::GetNumberArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->kind != GgufValue::Kind::kArray || v->array_type == kTypeString) {
    return WrongType(key, *v, "array of numbers");
  }
  return v->array_numbers;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mapping, MappedFile::Open(path));
  return Parse(std::move(mapping));
}

namespace {

// general.alignment, or the default: a power of two in [1, 2^20].
absl::StatusOr<uint64_t> AlignmentOf(const GgufMetadata& metadata, const std::string& path) {
  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = metadata.Find("general.alignment")) {
    if (a->kind != GgufValue::Kind::kUint && a->kind != GgufValue::Kind::kInt) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": general.alignment is not an integer"));
    }
    const int64_t v = a->kind == GgufValue::Kind::kUint ? static_cast<int64_t>(a->u) : a->i;
    if (v <= 0 || v > (1 << 20) || (v & (v - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": general.alignment ", v, " is not a power of two in [1, 2^20]"));
    }
    alignment = static_cast<uint64_t>(v);
  }
  return alignment;
}

// Points each tensor at its data, `data_start` bytes into the mapping, after checking
// that the data is aligned and inside the file.
absl::Status LocateTensorData(const MappedFile& mapping, uint64_t data_start, uint64_t alignment,
                              std::vector<GgufTensorInfo>& tensors) {
  const std::string& path = mapping.path();
  const uint64_t file_size = mapping.size();
  for (GgufTensorInfo& info : tensors) {
    const uint64_t nbytes = DTypeBytes(info.dtype, info.ref.numel());
    if (info.offset % alignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", info.name, "' data offset ", info.offset,
          " is not a multiple of the alignment ", alignment));
    }
    if (data_start > file_size || info.offset > file_size - data_start ||
        nbytes > file_size - data_start - info.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", info.name, "' data (", nbytes, " bytes at data offset ",
          info.offset, ", file offset ", data_start + info.offset,
          ") extends past the end of the file (", file_size, " bytes); file truncated?"));
    }
    const uint64_t abs = data_start + info.offset;
    // Element types need their element alignment; block types are read bytewise (their
    // f16 scales with memcpy), as ggml's own files only promise the file's alignment.
    if (!IsQuantized(info.dtype) && abs % DTypeSize(info.dtype) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", info.name, "' data at file offset ", abs,
          " is misaligned for ", std::string(DTypeName(info.dtype))));
    }
    info.ref.data = mapping.data() + abs;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::shared_ptr<MappedFile> mapping) {
  const std::string& path = mapping->path();
  auto file = std::unique_ptr<GgufFile>(new GgufFile());
  file->path_ = path;
  file->file_ = mapping;
  ByteReader r(path, mapping->data(), mapping->size());

  // Header.
  RETURN_IF_ERROR(r.Need(4, "magic"));
  if (std::memcmp(mapping->data(), "GGUF", 4) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a GGUF file (bad magic; expected \"GGUF\")"));
  }
  RETURN_IF_ERROR(r.Read<uint32_t>("magic").status());
  ASSIGN_OR_RETURN(file->version_, r.Read<uint32_t>("version"));
  if (file->version_ != 2 && file->version_ != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": unsupported GGUF version ", file->version_,
                     " (supported: 2 and 3, little endian)"));
  }
  ASSIGN_OR_RETURN(uint64_t tensor_count, r.Read<uint64_t>("tensor count"));
  ASSIGN_OR_RETURN(uint64_t kv_count, r.Read<uint64_t>("metadata key/value count"));
  // Smallest possible entries: kv = key length + type + 1-byte value; tensor info =
  // name length + n_dims + one dim + type + offset.
  constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
  constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
  if (kv_count > r.remaining() / kMinKvBytes) {
    return r.Error("metadata key/value count",
                   absl::StrCat("file truncated (", kv_count, " key/values cannot fit in ",
                                r.remaining(), " bytes)"));
  }
  if (tensor_count > r.remaining() / kMinTensorInfoBytes) {
    return r.Error("tensor count",
                   absl::StrCat("file truncated (", tensor_count,
                                " tensor infos cannot fit in ", r.remaining(), " bytes)"));
  }

  // Metadata.
  auto& values = file->metadata_.mutable_values();
  for (uint64_t k = 0; k < kv_count; ++k) {
    ASSIGN_OR_RETURN(std::string key,
                     r.ReadString(absl::StrCat("key of metadata entry #", k), kMaxNameLength));
    ASSIGN_OR_RETURN(GgufValue value, ReadValue(r, key));
    if (values.count(key) != 0) {
      return r.Error(absl::StrCat("metadata entry #", k),
                     absl::StrCat("duplicate key '", key, "'"));
    }
    values.emplace(std::move(key), std::move(value));
  }

  ASSIGN_OR_RETURN(const uint64_t alignment, AlignmentOf(file->metadata_, path));

  // Tensor directory.
  file->tensors_.reserve(static_cast<size_t>(tensor_count));
  std::set<std::string, std::less<>> names;
  for (uint64_t t = 0; t < tensor_count; ++t) {
    ASSIGN_OR_RETURN(GgufTensorInfo info, ReadTensorInfo(r, path, t));
    if (!names.insert(info.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": duplicate tensor name '", info.name, "'"));
    }
    file->tensors_.push_back(std::move(info));
  }

  // Data section: starts at the next multiple of `alignment`.
  const uint64_t data_start = (r.pos() + alignment - 1) / alignment * alignment;
  RETURN_IF_ERROR(LocateTensorData(*mapping, data_start, alignment, file->tensors_));
  return file;
}

}  // namespace crossreg
