#include "clients/loadgen/multi_turn.h"

#include "absl/strings/str_format.h"
#include "clients/common/names.h"
#include "clients/loadgen/concurrently.h"
#include "clients/loadgen/distinct_windows.h"
#include "clients/loadgen/run_stream.h"

namespace crossreg::clients {

int MultiTurnPoolTokens(const MultiTurnShape& shape) {
  const int messages = shape.conversations * (shape.turns - 1);
  return shape.opening_tokens + shape.conversations - 1 + (messages > 0 ? shape.message_tokens + messages - 1 : 0);
}

absl::Status CheckMultiTurnFits(const MultiTurnShape& shape, int max_tokens, int context_length) {
  const int64_t need = int64_t{shape.opening_tokens} + int64_t{shape.turns - 1} * shape.message_tokens +
                       int64_t{shape.turns} * max_tokens;
  if (need <= context_length) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--workload=multi_turn: the last turn needs --prefix_tokens (%d) + (--turns - 1) x --suffix_tokens (%d x %d) + "
      "--turns x --max_tokens (%d x %d) = %d tokens, more than the model's context of %d",
      shape.opening_tokens, shape.turns - 1, shape.message_tokens, shape.turns, max_tokens, need, context_length));
}

absl::StatusOr<std::vector<Conversation>> PlanConversations(const std::vector<int32_t>& pool,
                                                            const MultiTurnShape& shape, int* shuffled) {
  auto openings = DistinctWindows(pool, shape.opening_tokens, shape.conversations, 0, shuffled);
  if (!openings.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat("--prefix_tokens=%d x --conversations=%d: %s",
                                                         shape.opening_tokens, shape.conversations,
                                                         openings.status().message()));
  }
  // The messages come from the text after the openings where the pool has it: new
  // text, as a user's message would be, rather than a repeat of the history that
  // n-gram drafting would find.
  const int per_conversation = shape.turns - 1;
  std::vector<std::vector<int32_t>> messages;
  if (per_conversation > 0) {
    auto picked = DistinctWindows(pool, shape.message_tokens, shape.conversations * per_conversation,
                                  shape.opening_tokens + shape.conversations - 1, shuffled);
    if (!picked.ok()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("--suffix_tokens=%d x --conversations=%d x (--turns - 1): %s", shape.message_tokens,
                          shape.conversations, picked.status().message()));
    }
    messages = std::move(*picked);
  }
  std::vector<Conversation> out(static_cast<size_t>(shape.conversations));
  for (size_t c = 0; c < out.size(); ++c) {
    out[c].opening = std::move((*openings)[c]);
    for (int k = 0; k < per_conversation; ++k) {
      out[c].messages.push_back(std::move(messages[c * static_cast<size_t>(per_conversation) + k]));
    }
  }
  return out;
}

std::vector<StreamResult> RunConversations(crossreg::v1::Generation::Stub& stub,
                                           const crossreg::v1::GenerateRequest& request_template,
                                           const std::vector<Conversation>& conversations,
                                           const std::vector<crossreg::v1::DecodingMode>& modes, int concurrency,
                                           const std::string& id_prefix) {
  const int count = static_cast<int>(conversations.size());
  const int turns = count > 0 ? static_cast<int>(conversations[0].messages.size()) + 1 : 0;
  std::vector<StreamResult> results(static_cast<size_t>(count) * turns);
  ForEachConcurrently(count, concurrency, [&](int c) {
    const Conversation& conversation = conversations[static_cast<size_t>(c)];
    const crossreg::v1::DecodingMode mode = modes[static_cast<size_t>(c) % modes.size()];
    std::vector<int32_t> prompt = conversation.opening;
    int64_t reusable = 0;  // what turn k's cache could hold of turn k + 1's prompt
    for (int k = 1; k <= turns; ++k) {
      const int index = c * turns + k - 1;
      crossreg::v1::GenerateRequest request = request_template;
      request.set_request_id(absl::StrFormat("%sc%d-t%d", id_prefix, c, k));
      *request.mutable_token_ids()->mutable_ids() =
          google::protobuf::RepeatedField<int32_t>(prompt.begin(), prompt.end());
      request.mutable_decoding()->set_mode(mode);
      request.mutable_sampling()->set_seed(request_template.sampling().seed() + static_cast<uint64_t>(index));
      std::vector<int32_t> output;
      StreamResult& result = results[static_cast<size_t>(index)];
      result = RunStream(stub, request, &output);
      result.turn = k;
      result.reusable_prompt_tokens = reusable;
      if (result.code != grpc::StatusCode::OK) {
        // Later turns need this turn's output; record them so the report counts them.
        for (int later = k + 1; later <= turns; ++later) {
          StreamResult& skipped = results[static_cast<size_t>(c * turns + later - 1)];
          skipped.mode = DecodingModeName(mode);
          skipped.turn = later;
          skipped.code = grpc::StatusCode::ABORTED;
          skipped.error_message = absl::StrFormat("not sent: turn %d of its conversation failed", k);
        }
        return;
      }
      if (k == turns) return;
      reusable = static_cast<int64_t>(prompt.size() + output.size());
      prompt.insert(prompt.end(), output.begin(), output.end());
      const auto& message = conversation.messages[static_cast<size_t>(k - 1)];
      prompt.insert(prompt.end(), message.begin(), message.end());
    }
  });
  return results;
}

}  // namespace crossreg::clients
