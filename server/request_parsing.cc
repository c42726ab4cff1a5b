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

// The path of a field from the root message, as the API's errors name fields:
// "sampling.stop", "prompt.text" (a oneof member is named with its oneof). Empty
// when `full_name` ("crossreg.v1.SamplingParams.stop") is not reachable.
std::string FieldPath(const google::protobuf::Descriptor* type, const std::string& full_name, int depth = 0) {
  if (depth > 4) return "";
  for (int i = 0; i < type->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = type->field(i);
    const google::protobuf::OneofDescriptor* oneof = f->real_containing_oneof();
    const std::string name = oneof != nullptr ? absl::StrCat(oneof->name(), ".", f->name()) : f->name();
    if (f->full_name() == full_name) return name;
    if (f->message_type() != nullptr) {
      std::string inner = FieldPath(f->message_type(), full_name, depth + 1);
      if (!inner.empty()) return absl::StrCat(name, ".", inner);
    }
  }
  return "";
}

absl::Status Diagnose(const google::protobuf::Message& message, const std::vector<std::string>& log) {
  const std::string type = message.GetDescriptor()->full_name();
  for (const std::string& line : log) {
    // "String field 'crossreg.v1.SamplingParams.stop' contains invalid UTF-8 data ..."
    if (line.find("invalid UTF-8") == std::string::npos) continue;
    const size_t open = line.find('\'');
    const size_t close = open == std::string::npos ? open : line.find('\'', open + 1);
    std::string field = "a string field";
    if (close != std::string::npos) {
      const std::string full_name = line.substr(open + 1, close - open - 1);
      field = FieldPath(message.GetDescriptor(), full_name);
      if (field.empty()) field = full_name;
    }
    return FieldViolation(field, "not valid UTF-8 (string fields must be UTF-8 text; send other bytes as token ids)");
  }
  return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ", type, " message (malformed protobuf)"));
}

}  // namespace

absl::Status ParseRequest(const std::string& bytes, google::protobuf::Message& message) {
  CapturedProtobufLog log;
  if (message.ParseFromString(bytes)) return absl::OkStatus();
  return Diagnose(message, log.lines());
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
