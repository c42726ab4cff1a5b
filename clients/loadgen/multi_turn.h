// The multi_turn workload: conversations whose every turn resends the whole history.
// Turn 1 sends a conversation's opening; turn k+1 sends turn k's prompt, turn k's
// output and a new user message, so a prefix cache could serve all of turn k's prompt
// and output again. Turns of one conversation run one after another; conversations run
// side by side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "clients/loadgen/stream_result.h"
#include "crossreg/v1/generation.grpc.pb.h"

namespace crossreg::clients {

struct MultiTurnShape {
  int opening_tokens = 0;  // --prefix_tokens
  int message_tokens = 0;  // --suffix_tokens
  int conversations = 0;   // --conversations
  int turns = 0;           // --turns
};

struct Conversation {
  std::vector<int32_t> opening;
  std::vector<std::vector<int32_t>> messages;  // the user messages of turns 2, 3, ...
};

// Token ids to ask of the setup call: an opening per conversation at offsets of their
// own, then the messages' text after them.
int MultiTurnPoolTokens(const MultiTurnShape& shape);

// The last turn's prompt plus its max_tokens must fit the model's context (every turn
// is assumed to produce max_tokens); the error names the flags.
absl::Status CheckMultiTurnFits(const MultiTurnShape& shape, int max_tokens, int context_length);

// Openings and messages are DistinctWindows of the pool: the conversations differ from
// their first ids on (no conversation reuses another's blocks), and no two messages
// are the same. `shuffled`, when given, counts the openings and messages that had to
// be shuffled ids (see DistinctWindows).
absl::StatusOr<std::vector<Conversation>> PlanConversations(const std::vector<int32_t>& pool,
                                                            const MultiTurnShape& shape, int* shuffled = nullptr);

// Runs every conversation, at most `concurrency` at once; conversation c uses
// modes[c % |modes|]. Result c * turns + (k - 1) is turn k of conversation c. When a
// turn fails its conversation stops: the turns not sent are recorded as ABORTED.
// Request ids are `id_prefix` + "c<c>-t<k>"; seeds the template's + c * turns + k - 1.
std::vector<StreamResult> RunConversations(crossreg::v1::Generation::Stub& stub,
                                           const crossreg::v1::GenerateRequest& request_template,
                                           const std::vector<Conversation>& conversations,
                                           const std::vector<crossreg::v1::DecodingMode>& modes, int concurrency,
                                           const std::string& id_prefix);

}  // namespace crossreg::clients
