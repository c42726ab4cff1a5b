#include "clients/common/proto_json.h"

#include <google/protobuf/util/json_util.h>

namespace crossreg::clients {

std::string ToJsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  // Only fails on malformed messages (e.g. invalid UTF-8 in a string field); say so
  // in-band rather than dropping the line.
  if (!status.ok()) return R"({"json_error":")" + std::string(status.message()) + R"("})";
  return out;
}

}  // namespace crossreg::clients
