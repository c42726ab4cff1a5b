#include "scheduler/stop_text_stream.h"

#include <algorithm>

namespace crossreg {

StopTextStream::StopTextStream(const Tokenizer& tokenizer, std::vector<std::string> stops, bool with_special)
    : decoder_(tokenizer, with_special), stops_(std::move(stops)) {
  // Generated text continues the prompt: no start-of-sequence space stripping.
  decoder_.ContinueSequence();
  for (const auto& s : stops_) hold_back_ = std::max(hold_back_, s.empty() ? 0 : s.size() - 1);
}

void StopTextStream::CutAtStop(size_t new_from) {
  size_t cut = std::string::npos;
  for (const auto& stop : stops_) {
    // A stop not found before must end in the new bytes.
    const size_t from = new_from >= stop.size() - 1 ? new_from - (stop.size() - 1) : 0;
    const size_t at = text_.find(stop, from);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut == std::string::npos) return;
  text_.resize(cut);
  stopped_ = true;
}

std::string StopTextStream::TakeSendable() {
  size_t end = text_.size();
  if (!stopped_) {
    end = end > sent_ + hold_back_ ? end - hold_back_ : sent_;
    // Never split a UTF-8 character: back up over continuation bytes.
    while (end > sent_ && end < text_.size() && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80) --end;
  }
  std::string out = text_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

std::string StopTextStream::Push(const std::vector<int32_t>& ids, size_t* ids_used) {
  *ids_used = 0;
  for (int32_t id : ids) {
    if (stopped_) break;
    const size_t before = text_.size();
    text_ += decoder_.Push(id);
    ++*ids_used;
    if (!stops_.empty() && text_.size() > before) CutAtStop(before);
  }
  return TakeSendable();
}

std::string StopTextStream::Finish() {
  if (!stopped_) {
    const size_t before = text_.size();
    text_ += decoder_.Flush();
    if (!stops_.empty() && text_.size() > before) CutAtStop(before);
  }
  const size_t end = text_.size();
  std::string out = text_.substr(std::min(sent_, end));
  sent_ = end;
  return out;
}

}  // namespace crossreg
