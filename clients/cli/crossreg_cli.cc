// crossreg: talk to crossreg-server from the shell.
//   crossreg --prompt "Once upon a time" --mode ngram --max_tokens 64
//   crossreg --model_info
//   crossreg --abort my-request-id
#include <iostream>
#include <iterator>
#include <string>

#include "absl/flags/flag.h"
#include "clients/cli/commands.h"
#include "clients/common/channel.h"
#include "clients/common/names.h"
#include "clients/common/program.h"
#include "clients/common/request_flags.h"
#include "clients/common/token_ids.h"

ABSL_FLAG(std::string, prompt, "", "Prompt text; '-' reads it from stdin");
ABSL_FLAG(std::string, prompt_ids, "", "Prompt as comma-separated token ids (instead of --prompt; no BOS added)");
ABSL_FLAG(std::string, request_id, "", "Id for this request (for --abort from another shell); empty = server assigns");
ABSL_FLAG(std::string, mode, "ar", "Decoding: ar, lossless, lossy, ngram");
ABSL_FLAG(std::string, format, "text", "Output: text (streamed, stats on stderr) or jsonl (one JSON object per message)");
ABSL_FLAG(bool, echo, false, "Text format: print the prompt before the continuation");
ABSL_FLAG(bool, model_info, false, "Print the server's model and limits, then exit");
ABSL_FLAG(std::string, abort, "", "Abort the live request with this id, then exit");

namespace crossreg::clients {
namespace {

int UsageError(const std::string& message) {
  std::cerr << "crossreg: " << message << "\n";
  return 2;
}

int Main() {
  const std::string format_name = absl::GetFlag(FLAGS_format);
  if (format_name != "text" && format_name != "jsonl") {
    return UsageError("--format must be text or jsonl, got '" + format_name + "'");
  }
  const OutputFormat format = format_name == "text" ? OutputFormat::kText : OutputFormat::kJsonl;
  const bool model_info = absl::GetFlag(FLAGS_model_info);
  const std::string abort_id = absl::GetFlag(FLAGS_abort);
  if (model_info && !abort_id.empty()) return UsageError("give --model_info or --abort, not both");

  // Everything about the request is checked before connecting: a typo should not wait
  // for a connection timeout to be reported.
  crossreg::v1::GenerateRequest request = RequestTemplateFromFlags();
  if (!model_info && abort_id.empty()) {
    std::string prompt = absl::GetFlag(FLAGS_prompt);
    const std::string prompt_ids = absl::GetFlag(FLAGS_prompt_ids);
    if (!prompt.empty() && !prompt_ids.empty()) return UsageError("give either --prompt or --prompt_ids, not both");
    if (prompt == "-") {
      prompt.assign(std::istreambuf_iterator<char>(std::cin), {});
      // `echo text |` ends with a newline nobody meant as part of the prompt.
      if (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
    }
    if (!prompt_ids.empty()) {
      auto ids = ParseTokenIds("prompt_ids", prompt_ids);
      if (!ids.ok()) return UsageError(std::string(ids.status().message()));
      request.mutable_token_ids()->mutable_ids()->Add(ids->begin(), ids->end());
    } else if (!prompt.empty()) {
      request.set_text(prompt);
    } else {
      return UsageError("nothing to do: give --prompt TEXT, --prompt_ids IDS, --model_info or --abort ID");
    }
    auto mode = ParseDecodingMode(absl::GetFlag(FLAGS_mode));
    if (!mode.ok()) return UsageError("--" + std::string(mode.status().message()));
    request.mutable_decoding()->set_mode(*mode);
    request.set_request_id(absl::GetFlag(FLAGS_request_id));
  }

  auto channel = ConnectFromFlags();
  if (!channel.ok()) {
    std::cerr << "crossreg: " << channel.status().message() << "\n";
    return 1;
  }
  if (model_info) return RunModelInfo(*channel, format);
  if (!abort_id.empty()) return RunAbort(*channel, abort_id, format);
  return RunGenerate(*channel, request, format, absl::GetFlag(FLAGS_echo));
}

}  // namespace
}  // namespace crossreg::clients

int main(int argc, char** argv) {
  crossreg::clients::ParseClientCommandLine(
      argc, argv,
      "Stream a generation from crossreg-server, or query it.\n"
      "  crossreg [--server host:port] --prompt TEXT [--mode ar|lossless|lossy|ngram] [--max_tokens N]\n"
      "  crossreg --model_info\n"
      "  crossreg --abort REQUEST_ID\n"
      "Text goes to stdout as it is generated; a stats line goes to stderr. Exit status:\n"
      "0 ok, 1 the server or connection failed (gRPC code and message on stderr), 2 bad flags.\n"
      "Flags may be written with dashes or underscores (--max-tokens).");
  return crossreg::clients::Main();
}
