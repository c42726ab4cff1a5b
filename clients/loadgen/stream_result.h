// What the load generator records about one Generate stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

namespace crossreg::clients {

struct StreamResult {
  std::string mode;  // "ar", "ngram", ...
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string error_message;

  // Client-side times in seconds, from just before the call is started.
  double ttft_s = -1;  // to the first chunk with tokens; -1 when none came
  double e2e_s = 0;    // to the end of the stream
  // Inter-token latency samples, one per token after the first chunk: a chunk of n
  // tokens arriving dt after the previous chunk contributes n samples of dt / n.
  // Speculative modes commit several tokens per chunk, so this is the mean time per
  // token a reader sees, comparable across modes.
  std::vector<double> itl_s;
  int64_t tokens_received = 0;

  // From the Complete message (zero when the stream failed).
  bool completed = false;
  int64_t completion_tokens = 0;
  int64_t forwards = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  double tokens_per_forward = 0;
  double server_queue_s = 0;
  double server_ttft_s = 0;
  int64_t prompt_tokens = 0;
  // Of prompt_tokens, those whose K/V the server took from its prefix cache
  // (Usage.cached_prompt_tokens; 0 from servers without prefix caching).
  int64_t cached_prompt_tokens = 0;

  // multi_turn only: the 1-based turn within its conversation (0 = not a conversation
  // turn), and the prompt tokens a prefix cache could hold from the previous turn (its
  // prompt + its output; 0 on turn 1), the ceiling for cached_prompt_tokens.
  int turn = 0;
  int64_t reusable_prompt_tokens = 0;
};

}  // namespace crossreg::clients
