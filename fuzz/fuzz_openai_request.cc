// OpenAI-style HTTP bodies as the front door reads them (server/http/http_front_door.cc):
// the input is a JSON body, parsed for /v1/completions and for /v1/chat/completions
// (ParseOpenAiRequest), once strict and once ignoring unknown fields; the lenient
// reading goes on, as it reaches more of what follows. For each tiny server
// (fuzz/tiny_server.h) a completion goes to RequestFromProto; a chat is rendered with
// each of the server's Jinja chat templates (ChatFormatter), a forced tool call's
// grammar made from its tools (ToolCallGrammar), held to the prompt byte limit,
// tokenized with special tokens parsed and no BOS added, and then goes to
// RequestFromProto with those ids. Every refusal's message is put in the body's terms (InJsonTerms), as the
// reply would be. Checks: refusals carry the codes the API documents, ignoring unknown
// fields only accepts more and never reads a body differently, ids lie in the
// vocabulary, an accepted request satisfies the engine's rules.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "crossreg/v1/generation.pb.h"
#include "engine/field_violation.h"
#include "fuzz/tiny_server.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/chat/chat_formatter.h"
#include "server/http/tool_call_grammar.h"
#include "server/http/openai_request.h"
#include "server/request_from_proto.h"

namespace crossreg::fuzz {
namespace {

using server::OpenAiEndpoint;

void CheckRefusal(const absl::Status& s, OpenAiEndpoint endpoint, const char* what) {
  Require(s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kFailedPrecondition, what);
  const std::string message(s.message());
  Require(!message.empty(), what);
  const absl::Status renamed = server::InJsonTerms(s, endpoint);
  Require(renamed.code() == s.code() && !renamed.message().empty(), "InJsonTerms changed the code or emptied a message");
  if (const std::optional<std::string> field = ViolatedField(renamed)) {
    Require(absl::StartsWith(renamed.message(), absl::StrCat(*field, ": ")), "a field error's message names another field");
  }
}

void Submit(const v1::GenerateRequest& proto, const TinyServer& server, OpenAiEndpoint endpoint) {
  auto api = server::RequestFromProto(proto, server.env, server.defaults);
  Trace(absl::StrCat("  RequestFromProto on ", server.name), api.status());
  if (!api.ok()) {
    CheckRefusal(api.status(), endpoint, "RequestFromProto refusal");
    return;
  }
  const GenerationRequest& r = api->request;
  Require(!r.prompt_ids.empty() && static_cast<int64_t>(r.prompt_ids.size()) < server.config.max_position,
          "accepted prompt length");
  for (int32_t id : r.prompt_ids) Require(id >= 0 && id < server.config.vocab_size, "accepted prompt id outside the vocabulary");
  Require(r.max_new_tokens >= 1, "accepted max_new_tokens < 1");
}

// What the front door does with a chat on one server, for each template family.
void Chat(const server::OpenAiRequest& request, const TinyServer& server) {
  const OpenAiEndpoint endpoint = OpenAiEndpoint::kChatCompletions;
  const server::ChatRequest& conversation = request.chat;
  for (size_t t = 0; t < server.chat_templates.size(); ++t) {
    const chat::ChatFormatter& chat = server.chat_templates[t];
    v1::GenerateRequest proto = request.proto;
    const bool forced = conversation.tool_choice.kind == server::ToolChoice::Kind::kRequired ||
                        conversation.tool_choice.kind == server::ToolChoice::Kind::kFunction;
    if (forced && !proto.has_structured_output()) {
      auto grammar = server::ToolCallGrammar(conversation, chat.tool_call_format());
      Trace(absl::StrCat("ToolCallGrammar on template ", t), grammar.status());
      if (!grammar.ok()) {
        CheckRefusal(grammar.status(), endpoint, "ToolCallGrammar refusal");
        continue;
      }
      proto.mutable_structured_output()->set_grammar(*grammar);
    }
    auto prompt = chat.Render(conversation.messages,
                              conversation.calls_tools() ? conversation.tools : nlohmann::ordered_json(nullptr));
    Trace(absl::StrCat("ChatFormatter::Render template ", t, " on ", server.name,
                       prompt.ok() ? absl::StrCat(", ", prompt->size(), " bytes") : ""),
          prompt.status());
    if (!prompt.ok()) {
      // Only the second template refuses conversations (an assistant speaking first).
      Require(t == 1, "a template without role checks refused a conversation");
      Require(prompt.status().code() == absl::StatusCode::kInvalidArgument, "a render refusal's code");
      continue;
    }
    if (server.defaults.max_prompt_bytes > 0 && prompt->size() > server.defaults.max_prompt_bytes) continue;
    const std::vector<int32_t> ids = server.tokenizer->Encode(*prompt, /*add_special=*/false, /*parse_special=*/true);
    for (int32_t id : ids) Require(id >= 0 && id < server.tokenizer->vocab_size(), "chat token id outside the vocabulary");
    proto.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
    Submit(proto, server, endpoint);
  }
}

// Both readings of one body, traced and checked against each other.
absl::StatusOr<server::OpenAiRequest> Parse(const std::string& body, OpenAiEndpoint endpoint) {
  const std::string name = endpoint == OpenAiEndpoint::kCompletions ? "completions" : "chat";
  auto strict = server::ParseOpenAiRequest(body, endpoint);
  Trace(absl::StrCat("ParseOpenAiRequest(", name, ")"), strict.status());
  auto lenient = server::ParseOpenAiRequest(body, endpoint, {/*ignore_unknown_fields=*/true});
  Trace(absl::StrCat("ParseOpenAiRequest(", name, ", ignore_unknown_fields)"), lenient.status());
  for (const auto* r : {&strict, &lenient}) {
    if (r->ok()) continue;
    Require(r->status().code() == absl::StatusCode::kInvalidArgument, "ParseOpenAiRequest refusal code");
    CheckRefusal(r->status(), endpoint, "ParseOpenAiRequest refusal");
  }
  if (strict.ok()) {
    Require(lenient.ok(), "ignoring unknown fields refused what the strict parser accepted");
    const server::OpenAiRequest& a = *strict;
    const server::OpenAiRequest& b = *lenient;
    const bool same = a.model == b.model && a.stream == b.stream && a.include_usage == b.include_usage &&
                      a.return_token_ids == b.return_token_ids && a.chat.messages == b.chat.messages &&
                      a.chat.tools == b.chat.tools && a.chat.tool_choice.kind == b.chat.tool_choice.kind &&
                      a.chat.tool_choice.function == b.chat.tool_choice.function &&
                      a.chat.parallel_tool_calls == b.chat.parallel_tool_calls &&
                      google::protobuf::util::MessageDifferencer::Equals(a.proto, b.proto);
    Require(same, "ignoring unknown fields read an accepted body differently");
  }
  return lenient;
}

}  // namespace
}  // namespace crossreg::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg;
  using fuzz::Require;
  const auto& servers = fuzz::TinyServers();
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (server::OpenAiEndpoint endpoint : {server::OpenAiEndpoint::kCompletions, server::OpenAiEndpoint::kChatCompletions}) {
    auto request = fuzz::Parse(body, endpoint);
    if (!request.ok()) continue;
    Require(request->endpoint == endpoint, "endpoint not kept");
    if (endpoint == server::OpenAiEndpoint::kChatCompletions) {
      Require(!request->chat.messages.empty(), "a chat without messages");
      Require(request->proto.prompt_case() == v1::GenerateRequest::PROMPT_NOT_SET, "a chat with a prompt");
      for (const fuzz::TinyServer& server : servers) fuzz::Chat(*request, server);
    } else {
      Require(request->proto.prompt_case() != v1::GenerateRequest::PROMPT_NOT_SET, "a completion without a prompt");
      for (const fuzz::TinyServer& server : servers) fuzz::Submit(request->proto, server, endpoint);
    }
  }
  return 0;
}
