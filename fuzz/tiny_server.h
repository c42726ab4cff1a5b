// What the request fuzzers validate against: two servers of the tiny llama model of
// tests/testing/tiny_gguf.h (context 64, a few hundred tokens), one with the
// SentencePiece vocabulary (<unk> <s> </s>, byte fallback) and one with the
// byte-level one (<|endoftext|>), each with the DecodingEnvironment and
// RequestDefaults a server with an adapter would run with, and chat templates in the
// two shapes real ones take (ChatML with tool calls in Hermes blocks, Llama 3.1 with
// tools as JSON and role checks that raise), written here for the fuzzers.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/decoding/generation_request.h"
#include "engine/io/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/model/model_config_parse.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/chat/chat_formatter.h"
#include "server/request_from_proto.h"
#include "tests/testing/tiny_gguf.h"

namespace crossreg::fuzz {

struct TinyServer {
  const char* name = "";
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  DecodingEnvironment env;          // points at config
  server::RequestDefaults defaults;  // points at tokenizer
  // The templates with this tokenizer's BOS and EOS pieces, as crossreg-server builds them.
  std::vector<chat::ChatFormatter> chat_templates;
};

namespace internal {

[[noreturn]] inline void SetupFailed(const char* what, const std::string& why) {
  std::fprintf(stderr, "tiny_server.h: %s: %s\n", what, why.c_str());
  std::abort();
}

inline void BuildTinyServer(TinyServer& s, testing::TinyVocab vocab, const char* name) {
  s.name = name;
  auto file = GgufFile::Parse(MappedFile::FromBytes("tiny.gguf", testing::TinyLlamaGguf(vocab).Serialize()));
  if (!file.ok()) SetupFailed(name, file.status().ToString());
  auto config = ModelConfigFromGguf((*file)->metadata());
  if (!config.ok()) SetupFailed(name, config.status().ToString());
  s.config = *std::move(config);
  auto spec = TokenizerSpecFromGguf((*file)->metadata());
  if (!spec.ok()) SetupFailed(name, spec.status().ToString());
  auto tokenizer = Tokenizer::Create(*std::move(spec));
  if (!tokenizer.ok()) SetupFailed(name, tokenizer.status().ToString());
  s.tokenizer = *std::move(tokenizer);

  s.env.model = &s.config;
  s.env.has_adapter = true;
  s.env.placeholder_token = s.config.vocab_size - 1;
  s.env.max_gamma = 16;
  s.env.cost_curve = nullptr;  // adaptive_gamma: FAILED_PRECONDITION
  s.defaults.tokenizer = s.tokenizer.get();
  s.defaults.gamma = 8;
  s.defaults.max_tokens = 128;
  s.defaults.adaptive_gamma = false;
  // crossreg-server's default limit (--max_prompt_bytes unset): a few hundred bytes
  // here, so that fuzzed prompts cross it often.
  s.defaults.max_prompt_bytes = server::PromptByteBound(*s.tokenizer, s.config.max_position);

  const TokenizerSpec& ts = s.tokenizer->spec();
  auto piece = [&ts](int32_t id) {
    return id >= 0 && id < static_cast<int32_t>(ts.tokens.size()) ? ts.tokens[id] : std::string();
  };
  // Short templates of the fuzzers' own in the shapes real templates take.
  const char* templates[] = {
      // ChatML, tools read from `tools`, assistant calls as <tool_call> blocks.
      "{%- if tools %}<|im_start|>system\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}<|im_end|>\n{% endif %}"
      "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
      "{%- for c in m.tool_calls or [] %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": "
      "{{ c.function.arguments }}}\n</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
      "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
      // Llama 3.1-like: BOS, alternation enforced, arguments as an object, an ipython role.
      "{{ bos_token }}{%- for m in messages %}"
      "{%- if m.role == 'assistant' and loop.first %}{{ raise_exception('the user speaks first') }}{% endif %}"
      "<|start_header_id|>{{ 'ipython' if m.role == 'tool' else m.role }}<|end_header_id|>\n\n"
      "{%- if m.tool_calls %}<|python_tag|>{% for c in m.tool_calls %}{\"name\": \"{{ c.function.name }}\", "
      "\"parameters\": {{ c.function.arguments | tojson }}}{% endfor %}{% else %}{{ m.content | trim }}{% endif %}"
      "<|eot_id|>{%- endfor %}{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
      // No tools support at all: crossreg describes them in a system message.
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}",
  };
  for (const char* text : templates) {
    auto formatter = chat::ChatFormatter::Create({text, "fuzz template", piece(ts.bos_id), piece(ts.eos_id)});
    if (!formatter.ok()) SetupFailed(name, std::string(formatter.status().message()));
    s.chat_templates.push_back(*std::move(formatter));
  }
}

}  // namespace internal

// Built on first use, never destroyed.
inline const std::array<TinyServer, 2>& TinyServers() {
  static const std::array<TinyServer, 2>* servers = [] {
    auto* s = new std::array<TinyServer, 2>();
    internal::BuildTinyServer((*s)[0], testing::TinyVocab::kSentencePiece, "spm");
    internal::BuildTinyServer((*s)[1], testing::TinyVocab::kByteLevel, "bytelevel");
    return s;
  }();
  return *servers;
}

// With CROSSREG_FUZZ_TRACE=1 in the environment, each step's outcome is printed to
// stderr: replay an input to see what the server would answer.
inline void Trace(const std::string& step, const absl::Status& status) {
  static const bool on = std::getenv("CROSSREG_FUZZ_TRACE") != nullptr;
  if (on) std::fprintf(stderr, "  %s: %s\n", step.c_str(), status.ToString().c_str());
}

// Traps (a crash libFuzzer reports) when a server-side contract is broken, with why.
inline void Require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  __builtin_trap();
}

}  // namespace crossreg::fuzz
