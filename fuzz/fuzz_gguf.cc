// GGUF: header, metadata and tensor directory (GgufFile::Parse), then what a loader
// reads from the metadata: the model config and the tokenizer.
#include <cstddef>
#include <cstdint>

#include "engine/io/gguf_file.h"
#include "engine/model/model_config_parse.h"
#include "engine/tokenizer/tokenizer.h"
#include "fuzz/exercise_tokenizer.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg;
  auto file = GgufFile::Parse(MappedFile::FromBytes(
      "fuzz.gguf", std::string_view(reinterpret_cast<const char*>(data), size)));
  if (!file.ok()) return 0;
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    (void)fuzz::TouchBytes(t.ref.data, t.ref.nbytes());  // every view lies in the file
  }
  auto config = ModelConfigFromGguf((*file)->metadata());
  if (config.ok()) (void)config->RopeInverseFrequencies();
  auto spec = TokenizerSpecFromGguf((*file)->metadata());
  if (spec.ok()) fuzz::ExerciseTokenizer(*std::move(spec));
  return 0;
}
