#include "server/chat/jinja_token_stream.h"

#include "absl/strings/str_cat.h"

namespace crossreg::jinja {

std::string DescribeToken(const Token& token) {
  switch (token.kind) {
    case TokenKind::kData:
      return "template data";
    case TokenKind::kVariableBegin:
      return "'{{'";
    case TokenKind::kVariableEnd:
      return "'}}'";
    case TokenKind::kBlockBegin:
      return "'{%'";
    case TokenKind::kBlockEnd:
      return "'%}'";
    case TokenKind::kEnd:
      return "end of template";
    case TokenKind::kString:
      return "a string";
    case TokenKind::kName:
    case TokenKind::kInteger:
    case TokenKind::kFloat:
    case TokenKind::kOperator:
      break;
  }
  return absl::StrCat("'", token.text, "'");
}

absl::Status TokenStream::Error(const Token& at, std::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat("line ", at.line, ", column ", at.column, ": ", std::string(what)));
}

absl::Status TokenStream::TooDeep() const {
  return Error(Current(), absl::StrCat("the template nests deeper than ", max_depth_, " levels"));
}

absl::Status TokenStream::ExpectOp(std::string_view op) {
  if (!IsOp(op)) return Error(Current(), absl::StrCat("expected '", std::string(op), "', got ", DescribeToken(Current())));
  Next();
  return absl::OkStatus();
}

absl::Status TokenStream::ExpectKind(TokenKind kind, std::string_view what) {
  if (Current().kind != kind) {
    return Error(Current(), absl::StrCat("expected ", std::string(what), ", got ", DescribeToken(Current())));
  }
  Next();
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenStream::ExpectName() {
  if (Current().kind != TokenKind::kName) {
    return Error(Current(), absl::StrCat("expected a name, got ", DescribeToken(Current())));
  }
  std::string name = Current().text;
  Next();
  return name;
}

}  // namespace crossreg::jinja
