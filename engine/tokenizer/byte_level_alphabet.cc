#include "engine/tokenizer/byte_level_alphabet.h"

#include <array>

#include "engine/tokenizer/utf8.h"

namespace crossreg::byte_level {
namespace {

bool MapsToItself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<std::string, 256> symbol;
  std::array<int, 512> byte_of_codepoint;  // -1: not in the alphabet
  Alphabet() {
    byte_of_codepoint.fill(-1);
    int next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const int cp = MapsToItself(b) ? b : next_extra++;
      utf8::AppendCodepoint(static_cast<uint32_t>(cp), &symbol[b]);
      byte_of_codepoint[cp] = b;
    }
  }
};

const Alphabet& GetAlphabet() {
  static const Alphabet* alphabet = new Alphabet();
  return *alphabet;
}

}  // namespace

const std::string& ByteToSymbol(uint8_t byte) { return GetAlphabet().symbol[byte]; }

void AppendSymbols(std::string_view bytes, std::string* out) {
  const Alphabet& alphabet = GetAlphabet();
  for (char c : bytes) out->append(alphabet.symbol[static_cast<uint8_t>(c)]);
}

std::string SymbolsToBytes(std::string_view symbols) {
  const Alphabet& alphabet = GetAlphabet();
  std::string bytes;
  bytes.reserve(symbols.size());
  size_t i = 0;
  while (i < symbols.size()) {
    uint32_t cp = 0;
    const size_t n = utf8::DecodeOne(symbols.substr(i), &cp);
    if (n == 0) {
      bytes.push_back(symbols[i++]);
      continue;
    }
    if (cp < alphabet.byte_of_codepoint.size() && alphabet.byte_of_codepoint[cp] >= 0) {
      bytes.push_back(static_cast<char>(alphabet.byte_of_codepoint[cp]));
    } else {
      bytes.append(symbols.substr(i, n));
    }
    i += n;
  }
  return bytes;
}

}  // namespace crossreg::byte_level
