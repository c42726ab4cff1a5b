// safetensors: the 8-byte header length, the JSON header, dtypes, shapes and data
// offsets (SafetensorsFile::Parse); every tensor view must lie in the file.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/dtype.h"
#include "engine/io/safetensors_file.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg;
  auto file = SafetensorsFile::Parse(MappedFile::FromBytes(
      "fuzz.safetensors", std::string_view(reinterpret_cast<const char*>(data), size)));
  if (!file.ok()) return 0;
  std::vector<float> f32;
  for (const auto& [name, ref] : (*file)->tensors()) {
    (void)fuzz::TouchBytes(ref.data, ref.nbytes());
    f32.resize(static_cast<size_t>(ref.numel()));
    ConvertToF32(ref.dtype, ref.data, f32.data(), f32.size());
  }
  return 0;
}
