// Streams generated ids as text while watching for text stop sequences. Text that
// could be the start of a stop sequence is held back until it cannot, so the text a
// client receives never contains any part of the stop sequence that ended it, and
// the chunks concatenate to exactly the final text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace crossreg {

class StopTextStream {
 public:
  // `with_special`: control tokens appear as their pieces (StreamDecoder).
  StopTextStream(const Tokenizer& tokenizer, std::vector<std::string> stops, bool with_special = false);

  // Decodes `ids` in order until a stop sequence appears. Returns the text that is
  // now safe to send; `*ids_used` = how many ids were consumed (all, unless stopped,
  // in which case the rest belong after the stop and are dropped).
  std::string Push(const std::vector<int32_t>& ids, size_t* ids_used);
  // End of generation: returns everything still held back (cut at a stop sequence
  // if the final bytes complete one).
  std::string Finish();
  bool stopped() const { return stopped_; }

 private:
  // Cuts text_ at the earliest stop sequence ending at or after `new_from`.
  void CutAtStop(size_t new_from);
  std::string TakeSendable();

  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  size_t hold_back_ = 0;  // longest stop - 1: bytes that may begin a stop
  std::string text_;      // all text decoded so far (cut at the stop once stopped)
  size_t sent_ = 0;       // bytes of text_ already returned
  bool stopped_ = false;
};

}  // namespace crossreg
