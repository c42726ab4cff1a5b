#include "server/chat/tool_call_id.h"

#include <random>
#include <string_view>

namespace crossreg::chat {

std::string RandomToolCallId() {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static constexpr int kRandomCharacters = 24;
  thread_local std::mt19937_64 generator{[] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(), device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = "call_";
  for (int i = 0; i < kRandomCharacters; ++i) id += kAlphabet[pick(generator)];
  return id;
}

}  // namespace crossreg::chat
