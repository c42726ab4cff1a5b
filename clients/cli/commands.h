// The three things `crossreg` does, one per file: stream a generation, describe the
// model, abort a request. Each returns the process exit status: 0 ok, 1 the server
// answered with an error, 2 a usage error.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "crossreg/v1/generation.pb.h"

namespace crossreg::clients {

enum class OutputFormat { kText, kJsonl };

// Streams `request`: in text mode prints chunk text as it arrives and a stats line on
// stderr at the end; in jsonl mode prints each GenerateResponse as a JSON line.
// `echo` prints the prompt text first (text mode).
int RunGenerate(const std::shared_ptr<grpc::Channel>& channel, const crossreg::v1::GenerateRequest& request,
                OutputFormat format, bool echo);

// Prints GetModelInfo's answer.
int RunModelInfo(const std::shared_ptr<grpc::Channel>& channel, OutputFormat format);

// Aborts the live request `request_id`; exit status 1 when no such request is live.
int RunAbort(const std::shared_ptr<grpc::Channel>& channel, const std::string& request_id, OutputFormat format);

}  // namespace crossreg::clients
