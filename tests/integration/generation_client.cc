#include "tests/integration/generation_client.h"

#include <cstdio>

#include "nlohmann/json.hpp"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {

StreamResult RunGenerate(v1::Generation::Stub& stub, const v1::GenerateRequest& request,
                         grpc::ClientContext* context) {
  grpc::ClientContext local;
  if (context == nullptr) context = &local;
  StreamResult out;
  auto reader = stub.Generate(context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    switch (response.response_case()) {
      case v1::GenerateResponse::kChunk:
        ++out.chunks;
        out.ids.insert(out.ids.end(), response.chunk().token_ids().begin(), response.chunk().token_ids().end());
        out.text += response.chunk().text();
        out.logprobs.insert(out.logprobs.end(), response.chunk().logprobs().begin(), response.chunk().logprobs().end());
        break;
      case v1::GenerateResponse::kComplete:
        out.has_complete = true;
        out.complete = response.complete();
        break;
      case v1::GenerateResponse::kError:
        out.has_error = true;
        out.error = response.error();
        break;
      case v1::GenerateResponse::RESPONSE_NOT_SET:
        break;
    }
  }
  out.status = reader->Finish();
  return out;
}

v1::GenerateRequest GreedyRequest(const std::string& prompt, v1::DecodingMode mode, int max_tokens, int gamma) {
  v1::GenerateRequest request;
  request.set_text(prompt);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_sampling()->set_max_tokens(max_tokens);
  request.mutable_decoding()->set_mode(mode);
  request.mutable_decoding()->set_gamma(gamma);
  return request;
}

namespace {
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
}  // namespace

CliResult RunCli(const std::string& model, const std::string& adapter, const std::string& prompt,
                 const std::string& mode, int max_tokens, int gamma) {
  std::string command = BinDir() + "/crossreg-generate --format jsonl --threads 1 --model " + ShellQuote(model) +
                        " --prompt " + ShellQuote(prompt) + " --mode " + mode +
                        " --max_new_tokens " + std::to_string(max_tokens) + " --gamma " + std::to_string(gamma);
  if (!adapter.empty()) command += " --adapter " + ShellQuote(adapter);
  command += " 2>&1";
  CliResult out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    out.error = "popen failed";
    return out;
  }
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int rc = pclose(pipe);
  if (rc != 0) {
    out.error = "exit " + std::to_string(rc) + ": " + output;
    return out;
  }
  auto json = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    out.error = "not JSON: " + output;
    return out;
  }
  out.ids = json["ids"].get<std::vector<int32_t>>();
  out.text = json["text"].get<std::string>();
  out.ok = true;
  return out;
}

}  // namespace crossreg::testing
