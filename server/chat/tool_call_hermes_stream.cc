#include "server/chat/tool_call_hermes_stream.h"

#include "server/chat/tool_call_parser.h"
#include "server/chat/tool_call_text.h"

namespace crossreg::chat {

void HermesToolCallStream::Push(std::string_view text, StreamDelta& out) {
  if (reader_.has_value()) {
    body_.append(text);
  } else {
    held_.append(text);
  }
  bool switched = true;
  while (switched) switched = reader_.has_value() ? AdvanceBlock(out) : AdvanceContent(out);
}

void HermesToolCallStream::Finish(StreamDelta& out) {
  if (reader_.has_value()) {
    // What is held back of a close tag stays unread, as ParseToolCalls leaves it.
    EndBlock(/*closed=*/false, out);
  }
  if (dropping_space_after_call_) held_ = std::string(StripLeadingJsonSpace(held_));
  SendContent(held_, out);
  held_.clear();
  held_space_ = 0;
  dropping_space_after_call_ = false;
  separator_.reset();
}

bool HermesToolCallStream::AdvanceContent(StreamDelta& out) {
  if (dropping_space_after_call_) {
    held_.erase(0, held_.size() - StripLeadingJsonSpace(held_).size());
    held_space_ = 0;
    if (held_.empty()) return false;
    dropping_space_after_call_ = false;
  }
  const std::string_view held = held_;
  const size_t open = held.find(kToolCallOpenTag, held_space_);
  if (open == std::string_view::npos) {
    // Hold back what the next piece may turn into a tag, the whitespace before it (dropped
    // if a call follows) and a cut-off character. The scan stops at held_space_, so a model
    // that writes nothing but whitespace costs linear time.
    const size_t tag_start = held.size() - PartialTagSuffixLength(held, kToolCallOpenTag);
    size_t text_end = tag_start;
    while (text_end > held_space_ && IsJsonSpace(held[text_end - 1])) --text_end;
    if (text_end == held_space_) {
      held_space_ = tag_start;
      return false;
    }
    const std::string_view sendable = held.substr(0, CompleteUtf8PrefixLength(held.substr(0, text_end)));
    SendContent(sendable, out);
    held_.erase(0, sendable.size());
    held_space_ = 0;
    return false;
  }
  const std::string_view before = held.substr(0, open);
  const std::string_view content = StripTrailingJsonSpace(before);
  SendContent(content, out);
  space_before_block_ = std::string(before.substr(content.size()));
  body_ = std::string(held.substr(open + kToolCallOpenTag.size()));
  held_.clear();
  held_space_ = 0;
  reader_.emplace(HermesCallRules());
  body_fed_ = 0;
  text_after_object_ = false;
  call_started_ = false;
  arguments_sent_ = 0;
  return true;
}

bool HermesToolCallStream::AdvanceBlock(StreamDelta& out) {
  const std::string_view body = body_;
  // A close tag cannot start before body_fed_: those bytes were fed because no tag could.
  const size_t close = body.find(kToolCallCloseTag, body_fed_);
  if (close == std::string_view::npos) {
    FeedBody(body.size() - PartialTagSuffixLength(body.substr(body_fed_), kToolCallCloseTag));
    SendCallProgress(out);
    return false;
  }
  FeedBody(close);
  std::string after = body_.substr(close + kToolCallCloseTag.size());
  body_.resize(close);
  EndBlock(/*closed=*/true, out);
  held_ = std::move(after);
  held_space_ = 0;
  return true;
}

void HermesToolCallStream::FeedBody(size_t end) {
  if (end <= body_fed_) return;
  const std::string_view piece = std::string_view(body_).substr(body_fed_, end - body_fed_);
  body_fed_ = end;
  const size_t read = reader_->Feed(piece);
  if (reader_->complete() && !IsAllJsonSpace(piece.substr(read))) text_after_object_ = true;
}

void HermesToolCallStream::SendCallProgress(StreamDelta& out) {
  if (block_malformed()) return;
  if (!call_started_) {
    if (!reader_->name().has_value()) return;  // arguments wait for the name
    call_started_ = true;
    out.tool_calls.push_back({.index = calls_started_, .id = new_id_(), .name = *reader_->name(), .arguments = {}});
    ++calls_started_;
  }
  const std::string_view arguments = reader_->arguments();
  const size_t sendable = CompleteUtf8PrefixLength(arguments);
  if (sendable > arguments_sent_) {
    out.AppendArguments(calls_started_ - 1, arguments.substr(arguments_sent_, sendable - arguments_sent_));
    arguments_sent_ = sendable;
  }
}

void HermesToolCallStream::EndBlock(bool closed, StreamDelta& out) {
  const bool is_call = reader_->complete() && !text_after_object_;
  if (is_call) {
    SendCallProgress(out);
    if (!separator_.has_value()) separator_ = sent_content_ ? space_before_block_ : std::string();
    dropping_space_after_call_ = true;
  } else {
    std::string block = space_before_block_;
    block.append(kToolCallOpenTag).append(body_);
    if (closed) block.append(kToolCallCloseTag);
    SendContent(block, out);
  }
  reader_.reset();
  space_before_block_.clear();
  body_.clear();
}

void HermesToolCallStream::SendContent(std::string_view piece, StreamDelta& out) {
  if (piece.empty()) return;
  if (separator_.has_value()) out.content.append(*separator_);
  separator_.reset();
  out.content.append(piece);
  sent_content_ = true;
}

}  // namespace crossreg::chat
