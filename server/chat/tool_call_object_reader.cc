#include "server/chat/tool_call_object_reader.h"

#include <utility>

#include "nlohmann/json.hpp"
#include "server/chat/tool_call_text.h"

namespace crossreg::chat {
namespace {

// A JSON string token's content; none if it is not one (the scanner has checked it, so
// this only guards against the two disagreeing).
std::optional<std::string> DecodeJsonString(const std::string& token) {
  const nlohmann::json value = nlohmann::json::parse(token, nullptr, /*allow_exceptions=*/false);
  if (!value.is_string()) return std::nullopt;
  return value.get<std::string>();
}

}  // namespace

size_t ToolCallObjectReader::Feed(std::string_view bytes) {
  if (state_ == State::kFailed) return bytes.size();
  size_t read = 0;
  while (read < bytes.size() && state_ != State::kComplete && state_ != State::kFailed) {
    ReadByte(bytes[read]);
    ++read;
  }
  return state_ == State::kFailed ? bytes.size() : read;
}

void ToolCallObjectReader::ReadByte(char byte) {
  switch (state_) {
    case State::kBeforeObject:
      if (IsJsonSpace(byte)) return;
      if (byte != '{') return Fail();
      state_ = State::kKeyOrObjectEnd;
      return;
    case State::kKeyOrObjectEnd:
    case State::kKey:
      if (IsJsonSpace(byte)) return;
      if (byte == '"') return StartKey();
      if (byte == '}' && state_ == State::kKeyOrObjectEnd) return EndObject();
      return Fail();
    case State::kInKey:
      token_ += byte;
      switch (scanner_.Push(byte)) {
        case JsonValueScanner::Step::kMore:
          return;
        case JsonValueScanner::Step::kComplete:
          return EndKey();
        case JsonValueScanner::Step::kEndedBefore:
        case JsonValueScanner::Step::kInvalid:
          return Fail();
      }
      return;
    case State::kColon:
      if (IsJsonSpace(byte)) return;
      if (byte != ':') return Fail();
      state_ = State::kBeforeValue;
      return;
    case State::kBeforeValue:
      if (IsJsonSpace(byte)) return;
      return StartValue(byte);
    case State::kInValue:
      return ValueByte(byte);
    case State::kAfterMember:
      if (IsJsonSpace(byte)) return;
      if (byte == ',') {
        state_ = State::kKey;
        return;
      }
      if (byte == '}') return EndObject();
      return Fail();
    case State::kComplete:
    case State::kFailed:
      return;
  }
}

void ToolCallObjectReader::StartKey() {
  // A key is read as a string value, so the scanner completes it at its closing quote.
  scanner_ = JsonValueScanner();
  scanner_.Push('"');
  token_ = "\"";
  state_ = State::kInKey;
}

void ToolCallObjectReader::EndKey() {
  const std::optional<std::string> key = DecodeJsonString(token_);
  if (!key.has_value()) return Fail();
  if (*key == "name") {
    if (saw_name_key_) return Fail();
    saw_name_key_ = true;
    member_ = Member::kName;
  } else if (*key == "arguments" || *key == "parameters") {
    // Both keys, or one twice, would leave two arguments texts where a call has one.
    if (saw_arguments_key_) return Fail();
    saw_arguments_key_ = true;
    member_ = Member::kArguments;
  } else {
    if (!rules_.other_keys_allowed) return Fail();
    member_ = Member::kOther;
  }
  state_ = State::kColon;
}

void ToolCallObjectReader::StartValue(char byte) {
  switch (member_) {
    case Member::kName:
      if (byte != '"') return Fail();
      break;
    case Member::kArguments:
      arguments_are_string_ = byte == '"';
      if (byte != '{' && !(arguments_are_string_ && rules_.arguments_may_be_string)) return Fail();
      break;
    case Member::kOther:
      break;
  }
  scanner_ = JsonValueScanner();
  token_.clear();
  state_ = State::kInValue;
  ValueByte(byte);
}

void ToolCallObjectReader::ValueByte(char byte) {
  const JsonValueScanner::Step step = scanner_.Push(byte);
  if (step == JsonValueScanner::Step::kInvalid) return Fail();
  if (step == JsonValueScanner::Step::kEndedBefore) {
    // Only another key's number ends this way; the byte is the object's again.
    state_ = State::kAfterMember;
    return ReadByte(byte);
  }
  if (member_ == Member::kArguments && !arguments_are_string_) {
    arguments_ += byte;
  } else if (member_ != Member::kOther) {
    token_ += byte;
  }
  if (step == JsonValueScanner::Step::kComplete) EndValue();
}

void ToolCallObjectReader::EndValue() {
  state_ = State::kAfterMember;
  switch (member_) {
    case Member::kName: {
      std::optional<std::string> name = DecodeJsonString(token_);
      if (!name.has_value() || name->empty()) return Fail();
      name_ = std::move(name);
      return;
    }
    case Member::kArguments: {
      if (!arguments_are_string_) return;
      std::optional<std::string> text = DecodeJsonString(token_);
      if (!text.has_value()) return Fail();
      const nlohmann::json parsed = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_object()) return Fail();
      arguments_ = std::move(*text);
      return;
    }
    case Member::kOther:
      return;
  }
}

void ToolCallObjectReader::EndObject() {
  if (!name_.has_value()) return Fail();
  if (!saw_arguments_key_) {
    if (rules_.arguments_required) return Fail();
    arguments_ = "{}";
  }
  state_ = State::kComplete;
}

}  // namespace crossreg::chat
