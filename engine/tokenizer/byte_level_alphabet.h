// GPT-2's reversible byte <-> printable character mapping used by byte-level BPE
// vocabularies: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order (so " " is "Ġ" and "\n" is "Ċ").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace crossreg::byte_level {

// UTF-8 of the character standing for `byte`.
const std::string& ByteToSymbol(uint8_t byte);
// Appends the symbols of every byte of `bytes`.
void AppendSymbols(std::string_view bytes, std::string* out);
// Inverse of AppendSymbols; characters outside the alphabet are copied as they are.
std::string SymbolsToBytes(std::string_view symbols);

}  // namespace crossreg::byte_level
