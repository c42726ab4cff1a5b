// Reads one tool-call object, {"name": "...", "arguments": {...}}, as its bytes arrive:
// the name once its string is complete, and the arguments' text as it grows, so that a
// stream can send both before the object ends. The whole-text parser feeds it all at once;
// both therefore accept exactly the same objects and read the same arguments text.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/chat/tool_call_json_scanner.h"

namespace crossreg::chat {

// What a call object may hold. Hermes blocks are marked by their tags, so the reader takes
// what models write there; a Llama 3.1 message is a call only if it is nothing else.
struct ToolCallObjectRules {
  bool arguments_may_be_string = true;  // "arguments": "{\"city\": \"Paris\"}"
  bool arguments_required = false;      // without them a call gets "{}"
  bool other_keys_allowed = true;       // keys besides name and arguments/parameters
};

class ToolCallObjectReader {
 public:
  explicit ToolCallObjectReader(ToolCallObjectRules rules) : rules_(rules) {}

  // Reads `bytes` up to and including the object's closing brace; returns how many it read
  // (all of them unless the object ended inside `bytes`; none once it has ended; all once
  // it has failed). Leading whitespace is read; anything else before '{' fails the object.
  size_t Feed(std::string_view bytes);

  // The object broke a rule or is not JSON; nothing more is read.
  bool failed() const { return state_ == State::kFailed; }
  // The object ended and is a call: name() and arguments() are final.
  bool complete() const { return state_ == State::kComplete; }
  // Set when the name's string has ended (decoded; never empty).
  const std::optional<std::string>& name() const { return name_; }
  // The arguments' text so far: an object's bytes as they arrive, from its '{'; a string's
  // decoded content once the string has ended and its content is a JSON object; "{}" when
  // the object ended without arguments. Only ever grows.
  const std::string& arguments() const { return arguments_; }

 private:
  enum class State {
    kBeforeObject,
    kKeyOrObjectEnd,  // after '{'
    kKey,             // after ','
    kInKey,
    kColon,
    kBeforeValue,
    kInValue,
    kAfterMember,
    kComplete,
    kFailed,
  };
  // What the member being read is for.
  enum class Member { kName, kArguments, kOther };

  void ReadByte(char byte);
  void StartKey();
  void EndKey();
  void StartValue(char byte);
  void ValueByte(char byte);
  void EndValue();
  void EndObject();
  void Fail() { state_ = State::kFailed; }

  ToolCallObjectRules rules_;
  State state_ = State::kBeforeObject;
  JsonValueScanner scanner_;  // the current key or value
  std::string token_;         // the current key's, name's or string arguments' JSON text
  Member member_ = Member::kOther;
  bool arguments_are_string_ = false;
  bool saw_name_key_ = false;
  bool saw_arguments_key_ = false;
  std::optional<std::string> name_;
  std::string arguments_;
};

}  // namespace crossreg::chat
