// crossreg-random-adapter: writes a random Cross-Regression adapter (PEFT directory)
// for a model, so lossless and lossy modes, the shared forward's cost and the GPU
// checks can run on any model before an adapter is trained. Its drafts are noise:
// acceptance will be near zero, which is what a cost measurement wants.
//   crossreg-random-adapter --model stories260K.gguf --out /tmp/adapter [--rank 16]
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/flags/flag.h"
#include "common/flags/flag_spelling.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/model/peft_writer.h"

ABSL_FLAG(std::string, model, "", "Model (.gguf file or Hugging Face directory) the adapter is for");
ABSL_FLAG(std::string, out, "", "Directory to write (created if missing)");
ABSL_FLAG(int, rank, 16, "LoRA rank on all seven linear layers of every block");
ABSL_FLAG(double, alpha, 16.0, "lora_alpha (scale = alpha / rank)");
ABSL_FLAG(double, magnitude, 0.5, "A and B uniform in +-magnitude/sqrt(fan_in)");
ABSL_FLAG(uint64_t, seed, 1, "Random seed");
ABSL_FLAG(int, placeholder_token_id, -1, "Placeholder token for empty draft slots; -1 = the model's last id");

int main(int argc, char** argv) {
  crossreg::tools::ParseFlags(argc, argv, "crossreg_random_adapter",
                              "Write a random Cross-Regression adapter (PEFT directory) for a model.\n"
                              "  crossreg-random-adapter --model PATH --out DIR [--rank 16] [--seed 1]");
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (model_path.empty() || out.empty()) {
    std::fprintf(stderr, "crossreg-random-adapter: --model and --out are required (see --help)\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_rank) < 1 || absl::GetFlag(FLAGS_rank) > 1024) {
    std::fprintf(stderr, "crossreg-random-adapter: --rank must be in [1, 1024]\n");
    return 2;
  }
  auto model = crossreg::LoadModel(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "crossreg-random-adapter: --model: %s\n", std::string(model.status().message()).c_str());
    return 2;
  }
  const crossreg::ModelConfig& config = (*model)->config;
  crossreg::RandomLoraOptions options;
  options.rank = absl::GetFlag(FLAGS_rank);
  options.alpha = static_cast<float>(absl::GetFlag(FLAGS_alpha));
  options.magnitude = static_cast<float>(absl::GetFlag(FLAGS_magnitude));
  options.seed = absl::GetFlag(FLAGS_seed);
  const int placeholder = absl::GetFlag(FLAGS_placeholder_token_id);
  options.placeholder_token_id = placeholder >= 0 ? placeholder : config.vocab_size - 1;
  if (options.placeholder_token_id >= config.vocab_size) {
    std::fprintf(stderr, "crossreg-random-adapter: --placeholder_token_id %d is outside the vocabulary [0, %d)\n",
                 options.placeholder_token_id, config.vocab_size);
    return 2;
  }
  auto adapter = crossreg::MakeRandomLoraAdapter(config, options);
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "crossreg-random-adapter: --out %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  if (auto s = crossreg::WritePeftAdapter(*adapter, config, out); !s.ok()) {
    std::fprintf(stderr, "crossreg-random-adapter: --out: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  // Read it back as the server will: a file it cannot load is not worth leaving.
  auto loaded = crossreg::LoadLoraAdapter(out, config);
  if (!loaded.ok()) {
    std::fprintf(stderr, "crossreg-random-adapter: the written adapter does not load: %s\n",
                 std::string(loaded.status().message()).c_str());
    return 1;
  }
  std::printf("wrote %s: rank %d on %d layers x 7 targets, placeholder token %d\n", out.c_str(), options.rank,
              config.num_layers, options.placeholder_token_id);
  return 0;
}
