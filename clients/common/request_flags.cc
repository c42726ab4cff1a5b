#include "clients/common/request_flags.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <iostream>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "clients/common/repeated_flag.h"

ABSL_FLAG(double, temperature, 0.0, "Sampling temperature; 0 = greedy");
ABSL_FLAG(int, top_k, 0, "Keep only the k most likely tokens; 0 = off");
ABSL_FLAG(double, top_p, 1.0, "Nucleus sampling mass in (0, 1]; 1 = off");
ABSL_FLAG(std::optional<uint64_t>, seed, std::nullopt,
          "Random seed; the same seed gives the same text in every exact mode. Unset: the server draws one "
          "and reports it (seed= on the stats line)");
ABSL_FLAG(int, max_tokens, 0,
          "Most tokens to generate; 0 = the server's default (--default_max_tokens). Also --max_new_tokens");
ABSL_FLAG(std::string, stop, "",
          "Text stop sequence; repeat the flag or give a comma list. Escapes: \\, \\n \\t \\\\");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating past the model's EOS token");
ABSL_FLAG(double, min_p, 0.0, "Drop tokens below min_p x the most likely one's probability, in [0, 1]; 0 = off");
ABSL_FLAG(double, presence_penalty, 0.0, "OpenAI presence penalty over the generated tokens, in [-2, 2]");
ABSL_FLAG(double, frequency_penalty, 0.0, "OpenAI frequency penalty over the generated tokens, in [-2, 2]");
ABSL_FLAG(double, repetition_penalty, 1.0, "Hugging Face repetition penalty over prompt and output, > 0; 1 = off");
ABSL_FLAG(std::string, logit_bias, "", "Logit biases as id:bias pairs, comma-separated (e.g. 13:-100,42:2.5)");
ABSL_FLAG(int, top_logprobs, -1,
          "Return each generated token's log-probability and the top N at its position (0..20); -1 = none");
ABSL_FLAG(std::string, logprobs_mode, "raw", "raw (the model's distribution) or processed (what is sampled from)");
ABSL_FLAG(double, beta, 0.0, "Lossy mode: EMA weight of earlier draft energies, in [0, 1)");
ABSL_FLAG(double, tau, 0.0, "Lossy mode: acceptance offset in nats, <= 0 (more negative accepts more)");
ABSL_FLAG(int, gamma, 0, "Draft slots per forward, 1..max_gamma; 0 = the server's default");
ABSL_FLAG(int, fork_outcomes, 0,
          "Lossless/lossy: acceptance counts below this get their own placeholder draft chain (0 = off)");
ABSL_FLAG(int, fork_depth, 0, "Forked refill: drafts per forked chain or outcome block (0 = gamma, or the "
          "server model's trained block rows if fewer)");
ABSL_FLAG(std::string, draft_layout, "",
          "Lossless/lossy: chain or blocks (one bidirectional draft block per acceptance outcome); empty = the "
          "layout the server's adapter was trained for");
ABSL_FLAG(std::string, adaptive_gamma, "",
          "Speculative modes: true/false sets decoding.adaptive_gamma (adapt each forward's draft length to "
          "acceptance and cost; true is refused by a server started with --adaptive_gamma=false); empty = the server's "
          "default (adaptive unless it was started with --adaptive_gamma=false)");
ABSL_FLAG(bool, ngram_assist, false, "Lossless/lossy: prompt-lookup drafts take the first slots where text repeats");
ABSL_FLAG(double, timeout_s, 0.0, "Deadline per Generate call in seconds; 0 = none");

namespace crossreg::clients {
namespace {

std::vector<std::string>& RepeatedStopValues() {
  static std::vector<std::string> values;
  return values;
}

}  // namespace

void SetRepeatedStopValues(std::vector<std::string> values) { RepeatedStopValues() = std::move(values); }

std::vector<std::string> StopSequencesFromFlags() {
  std::vector<std::string> out;
  // A --stop that reached Abseil (from a --flagfile) counts too.
  std::vector<std::string> raw = RepeatedStopValues();
  if (!absl::GetFlag(FLAGS_stop).empty()) raw.push_back(absl::GetFlag(FLAGS_stop));
  for (const auto& value : raw) {
    for (auto& s : SplitEscapedList(value)) out.push_back(std::move(s));
  }
  return out;
}

crossreg::v1::GenerateRequest RequestTemplateFromFlags() {
  crossreg::v1::GenerateRequest request;
  auto* sampling = request.mutable_sampling();
  sampling->set_temperature(static_cast<float>(absl::GetFlag(FLAGS_temperature)));
  sampling->set_top_k(absl::GetFlag(FLAGS_top_k));
  sampling->set_top_p(static_cast<float>(absl::GetFlag(FLAGS_top_p)));
  if (const std::optional<uint64_t> seed = absl::GetFlag(FLAGS_seed); seed.has_value()) sampling->set_seed(*seed);
  // max_tokens has presence in the protocol: left unset, the server applies its
  // --default_max_tokens. A negative value is sent so the server can reject it.
  if (absl::GetFlag(FLAGS_max_tokens) != 0) sampling->set_max_tokens(absl::GetFlag(FLAGS_max_tokens));
  for (auto& s : StopSequencesFromFlags()) sampling->add_stop(std::move(s));
  sampling->set_ignore_eos(absl::GetFlag(FLAGS_ignore_eos));
  sampling->set_min_p(static_cast<float>(absl::GetFlag(FLAGS_min_p)));
  sampling->set_presence_penalty(static_cast<float>(absl::GetFlag(FLAGS_presence_penalty)));
  sampling->set_frequency_penalty(static_cast<float>(absl::GetFlag(FLAGS_frequency_penalty)));
  if (absl::GetFlag(FLAGS_repetition_penalty) != 1.0) {
    sampling->set_repetition_penalty(static_cast<float>(absl::GetFlag(FLAGS_repetition_penalty)));
  }
  for (absl::string_view pair : absl::StrSplit(absl::GetFlag(FLAGS_logit_bias), ',', absl::SkipWhitespace())) {
    const std::vector<std::string> parts = absl::StrSplit(pair, ':');
    int32_t id = 0;
    float bias = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &id) || !absl::SimpleAtof(parts[1], &bias)) {
      std::cerr << "--logit_bias: '" << pair << "' is not id:bias (e.g. 13:-100)\n";
      std::exit(2);
    }
    (*sampling->mutable_logit_bias())[id] = bias;
  }
  if (absl::GetFlag(FLAGS_top_logprobs) >= 0) sampling->set_top_logprobs(absl::GetFlag(FLAGS_top_logprobs));
  const std::string lp_mode = absl::GetFlag(FLAGS_logprobs_mode);
  if (lp_mode == "processed") {
    sampling->set_logprobs_mode(crossreg::v1::LOGPROBS_MODE_PROCESSED);
  } else if (lp_mode != "raw") {
    std::cerr << "--logprobs_mode must be raw or processed, got '" << lp_mode << "'\n";
    std::exit(2);
  }
  auto* decoding = request.mutable_decoding();
  decoding->set_beta(static_cast<float>(absl::GetFlag(FLAGS_beta)));
  decoding->set_tau(static_cast<float>(absl::GetFlag(FLAGS_tau)));
  decoding->set_gamma(absl::GetFlag(FLAGS_gamma));
  decoding->set_fork_outcomes(absl::GetFlag(FLAGS_fork_outcomes));
  decoding->set_fork_depth(absl::GetFlag(FLAGS_fork_depth));
  decoding->set_ngram_assist(absl::GetFlag(FLAGS_ngram_assist));
  const std::string layout = absl::GetFlag(FLAGS_draft_layout);
  if (layout == "chain") {
    decoding->set_draft_layout(crossreg::v1::DRAFT_LAYOUT_CHAIN);
  } else if (layout == "blocks") {
    decoding->set_draft_layout(crossreg::v1::DRAFT_LAYOUT_BLOCKS);
  } else if (!layout.empty()) {
    std::cerr << "--draft_layout must be chain, blocks or empty (the adapter's), got '" << layout << "'\n";
    std::exit(2);
  }
  // adaptive_gamma has presence: only an explicit value overrides the server's default.
  const std::string adaptive = absl::GetFlag(FLAGS_adaptive_gamma);
  if (adaptive == "true" || adaptive == "false") {
    decoding->set_adaptive_gamma(adaptive == "true");
  } else if (!adaptive.empty()) {
    std::cerr << "--adaptive_gamma must be true, false or empty (the server's default), got '" << adaptive << "'\n";
    std::exit(2);
  }
  return request;
}

void ApplyDeadlineFromFlags(grpc::ClientContext& context) {
  const double timeout = absl::GetFlag(FLAGS_timeout_s);
  if (timeout <= 0) return;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           std::chrono::duration<double>(timeout)));
}

}  // namespace crossreg::clients
