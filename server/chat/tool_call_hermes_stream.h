// The streaming side of the Hermes format: text pieces in, content and tool-call deltas out
// as soon as they are certain. It reads exactly as ParseToolCalls(kHermes) does (same tag
// search, same ToolCallObjectReader, same whitespace rule), so its output joins up to the
// whole-text parse whatever the split, with one exception: a call's first delta goes out
// once its name is read (unless that same piece already shows the block malformed), and if
// the block proves malformed later (broken JSON after the name, text after the object, the
// message cut off inside it) what was sent cannot be taken back; the block's text is then
// sent as content as well, so nothing is lost.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "server/chat/tool_call_delta.h"
#include "server/chat/tool_call_object_reader.h"

namespace crossreg::chat {

class HermesToolCallStream {
 public:
  explicit HermesToolCallStream(std::function<std::string()> new_id) : new_id_(std::move(new_id)) {}

  void Push(std::string_view text, StreamDelta& out);
  // End of text (the last call): sends what was held back, and settles a block left open.
  void Finish(StreamDelta& out);
  bool saw_tool_calls() const { return calls_started_ > 0; }

 private:
  // Each returns true when it switched between content and a block with text left to read.
  bool AdvanceContent(StreamDelta& out);
  bool AdvanceBlock(StreamDelta& out);
  void FeedBody(size_t end);
  void SendCallProgress(StreamDelta& out);
  void EndBlock(bool closed, StreamDelta& out);
  void SendContent(std::string_view piece, StreamDelta& out);
  bool block_malformed() const { return reader_->failed() || text_after_object_; }

  std::function<std::string()> new_id_;
  int calls_started_ = 0;

  // Outside a block: text not yet sent (trailing whitespace, a possible start of the open
  // tag, a cut-off UTF-8 character), and whether whitespace right after a call is still
  // being dropped.
  std::string held_;
  size_t held_space_ = 0;  // how many of held_'s first bytes are known to be whitespace
  bool dropping_space_after_call_ = false;
  // ParseToolCalls's whitespace rule: after a run of calls, the whitespace before it, sent
  // only if more content follows; set while the run may go on.
  std::optional<std::string> separator_;
  bool sent_content_ = false;

  // Inside a block (reader_ set): the whitespace before its tag, sent only if it is not a
  // call; the text since the tag; how much of it the reader has had (the rest may be the
  // start of the close tag); what the call has sent.
  std::optional<ToolCallObjectReader> reader_;
  std::string space_before_block_;
  std::string body_;
  size_t body_fed_ = 0;
  bool text_after_object_ = false;
  bool call_started_ = false;
  size_t arguments_sent_ = 0;
};

}  // namespace crossreg::chat
