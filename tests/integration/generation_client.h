// Test-side helpers: run one Generate stream to the end, and the CLI reference.
#pragma once

#include <string>
#include <vector>

#include "crossreg/v1/generation.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace crossreg::testing {

struct StreamResult {
  grpc::Status status;
  std::vector<int32_t> ids;  // every chunk's token ids, in order
  std::string text;          // every chunk's text, concatenated
  std::vector<v1::TokenLogprob> logprobs;  // every chunk's, in order (sampling.top_logprobs set)
  int chunks = 0;
  bool has_complete = false;
  v1::Complete complete;
  bool has_error = false;
  v1::Error error;
};

// Reads the whole stream. `context` may be null (a fresh one is used).
StreamResult RunGenerate(v1::Generation::Stub& stub, const v1::GenerateRequest& request,
                         grpc::ClientContext* context = nullptr);

v1::GenerateRequest GreedyRequest(const std::string& prompt, v1::DecodingMode mode, int max_tokens, int gamma = 4);

struct CliResult {
  bool ok = false;
  std::string error;
  std::vector<int32_t> ids;
  std::string text;
};
// crossreg-generate --format jsonl with the same model, adapter and greedy settings.
CliResult RunCli(const std::string& model, const std::string& adapter, const std::string& prompt,
                 const std::string& mode, int max_tokens, int gamma = 4);

}  // namespace crossreg::testing
