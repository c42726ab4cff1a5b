#include "engine/io/safetensors_writer.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "engine/io/write_file.h"

namespace crossreg {

std::string SerializeSafetensors(const std::vector<SafetensorsEntry>& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // keeps the data 8-byte aligned
  std::string out(8, '\0');
  const uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);
  out += text;
  for (const SafetensorsEntry& t : tensors) out += t.bytes;
  return out;
}

absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsEntry>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  return WriteFileBytes(path, SerializeSafetensors(tensors, metadata));
}

SafetensorsEntry F32Entry(const std::string& name, const std::vector<int64_t>& shape,
                          const std::vector<float>& values) {
  return {name, "F32", shape,
          std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float))};
}

}  // namespace crossreg
