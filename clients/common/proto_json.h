// Protocol messages as one-line JSON, field names as in the .proto (snake_case) and
// zero values included, so scripts see every field of every message.
#pragma once

#include <string>

#include <google/protobuf/message.h>

namespace crossreg::clients {

std::string ToJsonLine(const google::protobuf::Message& message);

}  // namespace crossreg::clients
