#include "server/http/chat_template.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/field_violation.h"

namespace crossreg::server {
namespace {

std::string Trim(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

absl::Status Invalid(const std::string& field, const std::string& what) {
  return FieldViolation(field, what);
}

std::string RenderLlama3(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  std::string out = t.bos;
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n", Trim(m.content), "<|eot_id|>");
  }
  absl::StrAppend(&out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
  return out;
}

std::string RenderChatMl(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  std::string out;
  if (t.default_system && (messages.empty() || messages.front().role != "system")) {
    out = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
  }
  for (const ChatMessage& m : messages) absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  absl::StrAppend(&out, "<|im_start|>assistant\n");
  return out;
}

// Llama 2 and Mistral: [INST] turns. A system message (Llama 2: in <<SYS>> markers;
// Mistral: before the first user message) is folded into the first user turn.
absl::StatusOr<std::string> RenderInst(const ChatTemplate& t, std::vector<ChatMessage> messages) {
  std::string system;
  if (!messages.empty() && messages.front().role == "system") {
    system = messages.front().content;
    messages.erase(messages.begin());
  }
  if (messages.empty() || messages.back().role != "user") {
    return Invalid("messages", "the last message must be the user's (this model's template opens turns with [INST])");
  }
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool user_turn = i % 2 == 0;
    if ((m.role == "user") != user_turn || m.role == "system") {
      return Invalid(absl::StrCat("messages[", i, "].role"),
                     "this model's template needs user and assistant turns alternating, starting with the user "
                     "(one optional system message first)");
    }
    if (user_turn) {
      std::string content = m.content;
      if (i == 0 && !system.empty()) {
        content = t.family == ChatTemplateFamily::kLlama2 ? absl::StrCat("<<SYS>>\n", system, "\n<</SYS>>\n\n", content)
                                                          : absl::StrCat(system, "\n\n", content);
      }
      if (t.family == ChatTemplateFamily::kLlama2) {
        absl::StrAppend(&out, t.bos, "[INST] ", Trim(content), " [/INST]");
      } else {
        absl::StrAppend(&out, i == 0 ? t.bos : "", "[INST] ", content, " [/INST]");
      }
    } else if (t.family == ChatTemplateFamily::kLlama2) {
      absl::StrAppend(&out, " ", Trim(m.content), " ", t.eos);
    } else {
      absl::StrAppend(&out, m.content, t.eos);
    }
  }
  return out;
}

}  // namespace

const char* ChatTemplateFamilyName(ChatTemplateFamily family) {
  switch (family) {
    case ChatTemplateFamily::kLlama3:
      return "llama3";
    case ChatTemplateFamily::kLlama2:
      return "llama2";
    case ChatTemplateFamily::kMistral:
      return "mistral";
    case ChatTemplateFamily::kChatMl:
      return "chatml";
    case ChatTemplateFamily::kNone:
      break;
  }
  return "none";
}

ChatTemplate RecognizeChatTemplate(std::string_view text, std::string bos, std::string eos) {
  ChatTemplate t;
  t.bos = std::move(bos);
  t.eos = std::move(eos);
  const absl::string_view s(text.data(), text.size());
  if (absl::StrContains(s, "<|start_header_id|>") && absl::StrContains(s, "<|eot_id|>")) {
    t.family = ChatTemplateFamily::kLlama3;
  } else if (absl::StrContains(s, "<|im_start|>") && absl::StrContains(s, "<|im_end|>")) {
    t.family = ChatTemplateFamily::kChatMl;
    t.default_system = absl::StrContains(s, "You are a helpful assistant");
  } else if (absl::StrContains(s, "[INST]") && absl::StrContains(s, "[/INST]")) {
    t.family = absl::StrContains(s, "<<SYS>>") ? ChatTemplateFamily::kLlama2 : ChatTemplateFamily::kMistral;
  }
  return t;
}

absl::StatusOr<std::string> RenderChat(const ChatTemplate& chat, const std::vector<ChatMessage>& messages) {
  switch (chat.family) {
    case ChatTemplateFamily::kLlama3:
      return RenderLlama3(chat, messages);
    case ChatTemplateFamily::kChatMl:
      return RenderChatMl(chat, messages);
    case ChatTemplateFamily::kLlama2:
    case ChatTemplateFamily::kMistral:
      return RenderInst(chat, messages);
    case ChatTemplateFamily::kNone:
      break;
  }
  return absl::FailedPreconditionError("this model has no chat template crossreg recognises; use /v1/completions");
}

}  // namespace crossreg::server
