#include "clients/common/request_flags.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <iostream>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "clients/common/repeated_flag.h"

ABSL_FLAG(double, temperature, 0.0, "Sampling temperature; 0 = greedy");
ABSL_FLAG(int, top_k, 0, "Keep only the k most likely tokens; 0 = off");
ABSL_FLAG(double, top_p, 1.0, "Nucleus sampling mass in (0, 1]; 1 = off");
ABSL_FLAG(uint64_t, seed, 0, "Random seed; the same seed gives the same output");
ABSL_FLAG(int, max_tokens, 0,
          "Most tokens to generate; 0 = the server's default (--default_max_tokens). Also --max_new_tokens");
ABSL_FLAG(std::string, stop, "",
          "Text stop sequence; repeat the flag or give a comma list. Escapes: \\, \\n \\t \\\\");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating past the model's EOS token");
ABSL_FLAG(double, beta, 0.0, "Lossy mode: EMA weight of earlier draft energies, in [0, 1)");
ABSL_FLAG(double, tau, 0.0, "Lossy mode: acceptance offset in nats, <= 0 (more negative accepts more)");
ABSL_FLAG(int, gamma, 0, "Draft slots per forward, 1..max_gamma; 0 = the server's default");
ABSL_FLAG(int, fork_outcomes, 0,
          "Lossless/lossy: acceptance counts below this get their own placeholder draft chain (0 = off)");
ABSL_FLAG(int, fork_depth, 0, "Forked refill: drafts per forked chain (0 = gamma)");
ABSL_FLAG(std::string, adaptive_gamma, "",
          "Speculative modes: true/false sets decoding.adaptive_gamma (adapt each forward's draft length to "
          "acceptance and cost; needs a server started with --adaptive_gamma); empty = the server's default");
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
  sampling->set_seed(absl::GetFlag(FLAGS_seed));
  // max_tokens has presence in the protocol: left unset, the server applies its
  // --default_max_tokens. A negative value is sent so the server can reject it.
  if (absl::GetFlag(FLAGS_max_tokens) != 0) sampling->set_max_tokens(absl::GetFlag(FLAGS_max_tokens));
  for (auto& s : StopSequencesFromFlags()) sampling->add_stop(std::move(s));
  sampling->set_ignore_eos(absl::GetFlag(FLAGS_ignore_eos));
  auto* decoding = request.mutable_decoding();
  decoding->set_beta(static_cast<float>(absl::GetFlag(FLAGS_beta)));
  decoding->set_tau(static_cast<float>(absl::GetFlag(FLAGS_tau)));
  decoding->set_gamma(absl::GetFlag(FLAGS_gamma));
  decoding->set_fork_outcomes(absl::GetFlag(FLAGS_fork_outcomes));
  decoding->set_fork_depth(absl::GetFlag(FLAGS_fork_depth));
  decoding->set_ngram_assist(absl::GetFlag(FLAGS_ngram_assist));
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
