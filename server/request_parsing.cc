#include "server/request_parsing.h"

#include <climits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "server/library_logs.h"

namespace crossreg::server {
namespace {

// A field's name in the API's errors: "stop", or "text" of the oneof "prompt" as
// "prompt.text".
std::string FieldName(const google::protobuf::FieldDescriptor* f) {
  const google::protobuf::OneofDescriptor* oneof = f->real_containing_oneof();
  return oneof != nullptr ? absl::StrCat(oneof->name(), ".", f->name()) : f->name();
}

// UTF-8 as protobuf requires of string fields: no overlong forms, no surrogates,
// nothing above U+10FFFF.
bool ValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(extra) >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

// The path ("sampling.stop", "prompt.text") of the first string field in `bytes`, a
// message of `type` in wire format, whose value is not UTF-8: read from the bytes
// themselves, so the reply names the field without reading protobuf's log. Empty
// when there is none (or the bytes are malformed in another way).
std::string InvalidUtf8Field(absl::string_view bytes, const google::protobuf::Descriptor* type, int depth = 0) {
  using google::protobuf::FieldDescriptor;
  using google::protobuf::internal::WireFormatLite;
  if (depth > 8) return "";
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    const FieldDescriptor* f = type->FindFieldByNumber(static_cast<int>(WireFormatLite::GetTagFieldNumber(tag)));
    switch (WireFormatLite::GetTagWireType(tag)) {
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        std::string value;
        uint32_t length = 0;
        if (!in.ReadVarint32(&length) || !in.ReadString(&value, static_cast<int>(length))) return "";
        if (f == nullptr) break;
        if (f->type() == FieldDescriptor::TYPE_STRING && !ValidUtf8(value)) return FieldName(f);
        if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
          const std::string inner = InvalidUtf8Field(value, f->message_type(), depth + 1);
          if (!inner.empty()) return absl::StrCat(FieldName(f), ".", inner);
        }
        break;
      }
      case WireFormatLite::WIRETYPE_VARINT: {
        uint64_t ignored;
        if (!in.ReadVarint64(&ignored)) return "";
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED32:
        if (!in.Skip(4)) return "";
        break;
      case WireFormatLite::WIRETYPE_FIXED64:
        if (!in.Skip(8)) return "";
        break;
      default:
        return "";
    }
  }
  return "";
}

absl::Status Diagnose(const google::protobuf::Message& message, absl::string_view bytes) {
  const std::string field = InvalidUtf8Field(bytes, message.GetDescriptor());
  if (!field.empty()) {
    return FieldViolation(field, "not valid UTF-8 (string fields must be UTF-8 text; send other bytes as token ids)");
  }
  return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ", message.GetDescriptor()->full_name(),
                                                 " message (malformed protobuf)"));
}

}  // namespace

absl::Status ParseRequest(const std::string& bytes, google::protobuf::Message& message) {
  CapturedProtobufLog quiet;  // protobuf logs each refusal; a client must not flood the log
  if (message.ParseFromString(bytes)) return absl::OkStatus();
  return Diagnose(message, bytes);
}

absl::Status ParseRequest(const grpc::ByteBuffer& buffer, google::protobuf::Message& message) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InvalidArgumentError("the request could not be read");
  std::string bytes;
  bytes.reserve(buffer.Length());
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return ParseRequest(bytes, message);
}

absl::StatusOr<size_t> TopLevelFieldBytes(const grpc::ByteBuffer& buffer, int field_number) {
  using google::protobuf::internal::WireFormatLite;
  grpc::ByteBuffer copy(buffer);  // shares the slices; the reader needs a mutable buffer
  grpc::ProtoBufferReader reader(&copy);
  google::protobuf::io::CodedInputStream in(&reader);
  in.SetTotalBytesLimit(INT_MAX);
  size_t found = 0;
  auto malformed = [] { return absl::InvalidArgumentError("the request is not a valid protobuf message"); };
  while (const uint32_t tag = in.ReadTag()) {
    const int number = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
    switch (WireFormatLite::GetTagWireType(tag)) {
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t length = 0;
        if (!in.ReadVarint32(&length)) return malformed();
        if (number == field_number) found = length;
        if (!in.Skip(static_cast<int>(length))) return malformed();
        break;
      }
      case WireFormatLite::WIRETYPE_VARINT: {
        uint64_t ignored;
        if (!in.ReadVarint64(&ignored)) return malformed();
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED32:
        if (!in.Skip(4)) return malformed();
        break;
      case WireFormatLite::WIRETYPE_FIXED64:
        if (!in.Skip(8)) return malformed();
        break;
      default:  // groups are not used by proto3
        return malformed();
    }
  }
  return found;
}

grpc::ByteBuffer SerializeResponse(const google::protobuf::Message& message) {
  std::string bytes = message.SerializeAsString();
  grpc::Slice slice(std::move(bytes));
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace crossreg::server
