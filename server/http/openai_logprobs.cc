#include "server/http/openai_logprobs.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace crossreg::server {
namespace {

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + static_cast<size_t>(n) > s.size()) return false;
    for (int k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0xc0) != 0x80) return false;
    }
    i += static_cast<size_t>(n);
  }
  return true;
}

OpenAiJson Bytes(const std::string& s) {
  OpenAiJson out = OpenAiJson::array();
  for (char c : s) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string TokenText(const Tokenizer& tokenizer, int32_t id) {
  const std::string bytes = tokenizer.TokenBytes(id);
  if (IsValidUtf8(bytes)) return bytes;
  std::string out = "bytes:";
  for (char c : bytes) out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
  return out;
}

double JsonLogprob(float logprob) { return std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0; }

OpenAiJson CompletionLogprobs(const std::vector<TokenLogprob>& logprobs, const Tokenizer& tokenizer,
                              int64_t text_offset) {
  OpenAiJson tokens = OpenAiJson::array(), values = OpenAiJson::array(), tops = OpenAiJson::array(),
             offsets = OpenAiJson::array();
  for (const TokenLogprob& lp : logprobs) {
    tokens.push_back(TokenText(tokenizer, lp.token));
    values.push_back(JsonLogprob(lp.logprob));
    OpenAiJson top = OpenAiJson::object();
    for (const auto& [id, value] : lp.top) top[TokenText(tokenizer, id)] = JsonLogprob(value);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(tokenizer.TokenBytes(lp.token).size());
  }
  return OpenAiJson{{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

OpenAiJson ChatLogprobs(const std::vector<TokenLogprob>& logprobs, const Tokenizer& tokenizer) {
  OpenAiJson content = OpenAiJson::array();
  for (const TokenLogprob& lp : logprobs) {
    OpenAiJson top = OpenAiJson::array();
    for (const auto& [id, value] : lp.top) {
      const std::string text = TokenText(tokenizer, id);
      top.push_back({{"token", text}, {"logprob", JsonLogprob(value)}, {"bytes", Bytes(tokenizer.TokenBytes(id))}});
    }
    content.push_back({{"token", TokenText(tokenizer, lp.token)},
                       {"logprob", JsonLogprob(lp.logprob)},
                       {"bytes", Bytes(tokenizer.TokenBytes(lp.token))},
                       {"top_logprobs", top}});
  }
  return OpenAiJson{{"content", content}};
}

}  // namespace crossreg::server
