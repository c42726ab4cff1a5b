// UTF-8 text as Python's str sees it: code points, and the character properties and case
// mappings of Python's str methods (Unicode 14.0, as Python 3.11). Templates index,
// slice, measure and case-map text by code point, so "é"[0] and "日本"|length agree with
// the Python reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace crossreg::jinja {

// Whether `text` is well-formed UTF-8 (no surrogates, no overlong forms).
bool IsValidUtf8(std::string_view text);

// The code point that starts at text[*at], advancing *at past it. The text must be valid
// UTF-8 (every string the interpreter holds is checked when it enters).
char32_t NextCodePoint(std::string_view text, size_t* at);
void AppendUtf8(char32_t cp, std::string* out);
std::vector<char32_t> ToCodePoints(std::string_view text);
std::string FromCodePoints(const std::vector<char32_t>& cps);
size_t CodePointCount(std::string_view text);

// Byte offset of code point number `index` (the text's size when index is past the end).
size_t ByteOffsetOfCodePoint(std::string_view text, size_t index);

// str.isspace() for one character (also what Python's regex \s matches).
bool IsPythonSpace(char32_t cp);
// A line boundary of str.splitlines().
bool IsLineBreak(char32_t cp);
// str.isprintable() for one character: repr() escapes the others.
bool IsPrintable(char32_t cp);
bool IsLowercase(char32_t cp);
bool IsUppercase(char32_t cp);
bool IsTitlecase(char32_t cp);
bool IsCased(char32_t cp);

// Python's str.upper(), str.lower(), str.title(), str.capitalize() (full mappings,
// final sigma included), str.islower() and str.isupper().
std::string PythonUpper(std::string_view text);
std::string PythonLower(std::string_view text);
std::string PythonTitle(std::string_view text);
std::string PythonCapitalize(std::string_view text);
bool PythonIsLower(std::string_view text);
bool PythonIsUpper(std::string_view text);

}  // namespace crossreg::jinja
