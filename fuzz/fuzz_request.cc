// gRPC requests as crossreg-server reads them: the input is the wire bytes of a
// crossreg.v1.GenerateRequest, held in a grpc::ByteBuffer cut into slices where the
// input's hash says. What GenerateReactor::Submit does with it: the prompt's size on
// the wire (TopLevelFieldBytes), ParseRequest, then RequestFromProto against each
// tiny server (fuzz/tiny_server.h). The same bytes as an Abort and a GetModelInfo
// request (generation_service.cc). Checks: the two ParseRequest overloads agree; a
// parsed text prompt is as long as TopLevelFieldBytes measured it; refusals carry the
// codes and messages the API documents; an accepted request satisfies the engine's
// rules.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "crossreg/v1/generation.pb.h"
#include "fuzz/tiny_server.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "server/request_from_proto.h"
#include "server/request_parsing.h"

namespace crossreg::fuzz {
namespace {

// 1 to 4 slices (some may be empty), cut at points drawn from a hash of the bytes: the
// same input always gets the same cuts, a mutation moves them.
grpc::ByteBuffer SlicedBuffer(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : bytes) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  std::vector<size_t> cuts;
  for (uint64_t n = h % 4; n > 0; --n) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    cuts.push_back(static_cast<size_t>((h >> 33) % (bytes.size() + 1)));
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(bytes.size());
  std::vector<grpc::Slice> slices;
  size_t begin = 0;
  for (size_t end : cuts) {
    slices.emplace_back(bytes.data() + begin, end - begin);
    begin = end;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// The message's bytes with map entries in key order: a plain SerializeAsString walks a
// map (logit_bias) in its hash order, which differs between two equal maps.
std::string DeterministicBytes(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

void CheckRefusal(const absl::Status& s, const char* what) {
  Require(!s.message().empty(), what);
  Require(s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kFailedPrecondition, what);
}

void CheckAccepted(const server::ApiRequest& api, const TinyServer& server) {
  const GenerationRequest& r = api.request;
  Require(!r.prompt_ids.empty(), "accepted request has no prompt ids");
  Require(static_cast<int64_t>(r.prompt_ids.size()) < server.config.max_position, "accepted prompt fills the context");
  for (int32_t id : r.prompt_ids) Require(id >= 0 && id < server.config.vocab_size, "accepted prompt id outside the vocabulary");
  Require(r.max_new_tokens >= 1, "accepted max_new_tokens < 1");
  Require(r.decoding.gamma >= 1 && r.decoding.gamma <= server.env.max_gamma, "accepted gamma out of range");
  Require(MaxDecodeRows(r.decoding) >= DecodeHeadroom(r.decoding), "decode rows below the headroom");
  Require(api.request.stop_strings.size() <= 16, "accepted more than 16 stop strings");
  for (const std::string& stop : api.request.stop_strings) Require(!stop.empty() && stop.size() <= 256, "accepted a bad stop string");
}

}  // namespace
}  // namespace crossreg::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg;
  using fuzz::Require;
  const auto& servers = fuzz::TinyServers();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const grpc::ByteBuffer buffer = fuzz::SlicedBuffer(bytes);
  Require(buffer.Length() == size, "ByteBuffer length differs from the input");

  // The server measures the prompt on the wire only for requests over its limit; the
  // fuzzer always does, and for the other prompt field too.
  const absl::StatusOr<size_t> text_bytes = server::TopLevelFieldBytes(buffer, v1::GenerateRequest::kTextFieldNumber);
  (void)server::TopLevelFieldBytes(buffer, v1::GenerateRequest::kTokenIdsFieldNumber);
  fuzz::Trace(absl::StrCat("TopLevelFieldBytes(text) = ", text_bytes.ok() ? *text_bytes : 0), text_bytes.status());
  if (!text_bytes.ok()) Require(text_bytes.status().code() == absl::StatusCode::kInvalidArgument, "TopLevelFieldBytes code");

  v1::GenerateRequest request;
  const absl::Status parsed = server::ParseRequest(buffer, request);
  v1::GenerateRequest from_string;
  const absl::Status parsed_string = server::ParseRequest(bytes, from_string);
  fuzz::Trace("ParseRequest(GenerateRequest)", parsed);
  Require(parsed == parsed_string, "ParseRequest(ByteBuffer) and ParseRequest(string) disagree");
  if (!parsed.ok()) {
    Require(parsed.code() == absl::StatusCode::kInvalidArgument && !parsed.message().empty(), "ParseRequest refusal");
  } else {
    Require(fuzz::DeterministicBytes(request) == fuzz::DeterministicBytes(from_string), "the two parses differ");
    if (request.prompt_case() == v1::GenerateRequest::kText && text_bytes.ok()) {
      Require(*text_bytes == request.text().size(), "TopLevelFieldBytes differs from the parsed prompt.text");
    }
    for (const fuzz::TinyServer& server : servers) {
      auto api = server::RequestFromProto(request, server.env, server.defaults);
      fuzz::Trace(absl::StrCat("RequestFromProto on ", server.name), api.status());
      if (api.ok()) {
        fuzz::CheckAccepted(*api, server);
      } else {
        fuzz::CheckRefusal(api.status(), "RequestFromProto refusal");
      }
    }
  }

  v1::AbortRequest abort;
  const absl::Status abort_parsed = server::ParseRequest(buffer, abort);
  fuzz::Trace("ParseRequest(AbortRequest)", abort_parsed);
  if (!abort_parsed.ok()) Require(abort_parsed.code() == absl::StatusCode::kInvalidArgument, "Abort refusal code");
  v1::GetModelInfoRequest info;
  const absl::Status info_parsed = server::ParseRequest(buffer, info);
  fuzz::Trace("ParseRequest(GetModelInfoRequest)", info_parsed);
  if (!info_parsed.ok()) Require(info_parsed.code() == absl::StatusCode::kInvalidArgument, "GetModelInfo refusal code");
  return 0;
}
