// Request messages are parsed here, not by gRPC's generated handlers: when a
// generated callback handler fails to parse a request (a string field holding
// invalid UTF-8, a truncated message), gRPC 1.51 drops the reason and answers
// UNIMPLEMENTED with an empty message, while protobuf logs one unthrottled error
// line per call. The service therefore takes raw byte buffers
// (server/generation_service.h) and parses them with ParseRequest, which answers
// INVALID_ARGUMENT naming the field ("sampling.stop: not valid UTF-8 ...").
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace crossreg::server {

// Parses `bytes` (or `buffer`) into `message` (cleared first).
absl::Status ParseRequest(const std::string& bytes, google::protobuf::Message& message);
absl::Status ParseRequest(const grpc::ByteBuffer& buffer, google::protobuf::Message& message);

// The byte length of the top-level length-delimited field `field_number` (the last
// occurrence, as protobuf's parser keeps), read from the wire without parsing the
// message: a few varints and skips, however big the field. 0 when absent;
// INVALID_ARGUMENT when the top level is malformed.
absl::StatusOr<size_t> TopLevelFieldBytes(const grpc::ByteBuffer& buffer, int field_number);

// Serializes `message` for a raw-method reply.
grpc::ByteBuffer SerializeResponse(const google::protobuf::Message& message);

}  // namespace crossreg::server
