// Chat prompts for /v1/chat/completions. A model's chat template (tokenizer_config.json
// "chat_template", or GGUF "tokenizer.chat_template") is a Jinja program; crossreg does
// not run Jinja. It recognises the template families it knows by their markers and
// renders them in C++, exactly as those templates render (ALGORITHM.md needs exact
// prompts no more than the models do: a prompt off by one newline changes outputs).
// A model whose template is absent or unrecognised gets no chat: the front door
// refuses chat requests for it with a clear error, completions still work.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/http/openai_request.h"

namespace crossreg::server {

enum class ChatTemplateFamily {
  kNone,     // no template, or one not recognised
  kLlama3,   // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  kLlama2,   // <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] assistant </s>
  kMistral,  // <s>[INST] user [/INST]assistant</s>
  kChatMl,   // <|im_start|>role\ncontent<|im_end|>\n (Qwen2 adds a default system message)
};
const char* ChatTemplateFamilyName(ChatTemplateFamily family);  // "llama3", ..., "none"

struct ChatTemplate {
  ChatTemplateFamily family = ChatTemplateFamily::kNone;
  // Qwen2's template: a system message "You are a helpful assistant." when none is given.
  bool default_system = false;
  std::string bos;  // the BOS and EOS pieces the template writes as text
  std::string eos;
};

// Recognises `template_text` (kNone when empty or unknown).
ChatTemplate RecognizeChatTemplate(std::string_view template_text, std::string bos, std::string eos);

// The prompt text with the assistant's turn opened (add_generation_prompt), to be
// tokenized with special tokens parsed and no BOS added. INVALID_ARGUMENT
// "messages...: ..." when the family cannot express the conversation (Llama 2 and
// Mistral need user/assistant turns alternating, starting with the user).
absl::StatusOr<std::string> RenderChat(const ChatTemplate& chat, const std::vector<ChatMessage>& messages);

}  // namespace crossreg::server
