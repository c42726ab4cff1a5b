// One request as the scheduler holds it from Submit to its last event. Fields
// under "guarded" are shared with client threads (Abort) and touched only under the
// scheduler's mutex; the rest belong to the scheduling thread alone.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "engine/decoding/sequence_decoder.h"
#include "engine/kv/paged_kv_cache.h"
#include "scheduler/scheduler.h"
#include "scheduler/stop_text_stream.h"

namespace crossreg {

// Where a request is, the one state the scheduler keeps of it:
//   waiting -> prefilling -> decoding -> finished
// with preemption sending prefilling/decoding to preempted (which resumes as
// prefilling), and any live phase ending in cancelled (abort, deadline, error). Which
// queue holds a request, and whether it holds KV, follow from it: waiting and preempted
// are the two queues, prefilling and decoding the running list with a live sequence.
enum class RequestPhase { kWaiting, kPreempted, kPrefilling, kDecoding, kFinished, kCancelled };
inline bool Queued(RequestPhase p) { return p == RequestPhase::kWaiting || p == RequestPhase::kPreempted; }
inline bool Running(RequestPhase p) { return p == RequestPhase::kPrefilling || p == RequestPhase::kDecoding; }
inline bool Ended(RequestPhase p) { return p == RequestPhase::kFinished || p == RequestPhase::kCancelled; }

struct ScheduledRequest {
  GenerationRequest request;  // as submitted; the decoder keeps its own copy once admitted
  EventHandler on_event;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // of them, found in the prefix cache at first admission
  // KV positions beyond the sequence a decode step may append: 1 + gamma for the
  // speculative modes, 1 for AR (its gamma is unused).
  int64_t decode_headroom = 1;

  // Guarded by the scheduler's mutex.
  std::optional<absl::Status> abort_reason;  // set once by Abort or the deadline

  // The scheduling thread's (and Shutdown's before any loop ran); changed under the
  // mutex wherever the queues change with it.
  RequestPhase phase = RequestPhase::kWaiting;
  std::unique_ptr<SequenceDecoder> decoder;  // created at first admission, kept across preemption
  int64_t admit_order = 0;                   // larger = admitted (or resumed) later
  int64_t last_served_step = -1;             // last step its decode rows ran
  SteadyTime submitted;
  std::optional<SteadyTime> admitted;        // first admission
  std::optional<SteadyTime> prefilled;       // the prompt's K/V all cached
  std::optional<SteadyTime> first_token;
  SteadyTime last_commit;                    // previous commit, or submission before any
  std::optional<StopTextStream> text;        // the output as text, watching for stop strings
};

}  // namespace crossreg
