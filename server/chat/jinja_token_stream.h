// A cursor over the lexer's tokens, shared by the statement and expression parsers: the
// current token, errors that name its line and column, and the nesting count that
// bounds the parsers' recursion.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/chat/jinja_lexer.h"

namespace crossreg::jinja {

// A token as error messages name it: "'}}'", "'for'", "end of template".
std::string DescribeToken(const Token& token);

class TokenStream {
 public:
  // `tokens` ends with kEnd and outlives the stream.
  TokenStream(const std::vector<Token>& tokens, int max_depth) : tokens_(tokens), max_depth_(max_depth) {}

  const Token& Current() const { return tokens_[pos_]; }
  const Token& Look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(std::string_view op) const { return Current().kind == TokenKind::kOperator && Current().text == op; }
  bool IsName(std::string_view name) const { return Current().kind == TokenKind::kName && Current().text == name; }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }

  // INVALID_ARGUMENT "line L, column C: what".
  absl::Status Error(const Token& at, std::string_view what) const;
  absl::Status TooDeep() const;
  absl::Status ExpectOp(std::string_view op);
  absl::Status ExpectKind(TokenKind kind, std::string_view what);
  absl::StatusOr<std::string> ExpectName();

  int max_depth() const { return max_depth_; }

  // One level of the parsers' recursion, counted while it lasts against max_depth.
  class Nesting {
   public:
    explicit Nesting(TokenStream* stream) : stream_(stream) { ++stream_->nesting_; }
    ~Nesting() { --stream_->nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
    absl::Status Check() const {
      if (stream_->nesting_ > stream_->max_depth_) return stream_->TooDeep();
      return absl::OkStatus();
    }

   private:
    TokenStream* stream_;
  };

 private:
  const std::vector<Token>& tokens_;
  const int max_depth_;
  size_t pos_ = 0;
  int nesting_ = 0;
};

}  // namespace crossreg::jinja
