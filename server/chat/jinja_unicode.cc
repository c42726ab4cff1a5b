#include "server/chat/jinja_unicode.h"

#include <algorithm>
#include <iterator>

namespace crossreg::jinja {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

// Code points first, first + stride, ... (count of them) map to themselves plus delta.
struct CaseRun {
  char32_t first;
  uint32_t count;
  uint32_t stride;
  int32_t delta;
};

// A code point whose mapping is several code points (U+00DF 'ß' upper-cases to "SS").
struct CaseSpecial {
  char32_t cp;
  const char* utf8;
};

#include "server/chat/jinja_unicode_data.inc"

template <size_t N>
bool InRanges(const CodePointRange (&ranges)[N], char32_t cp) {
  const auto* end = ranges + N;
  const auto* it = std::upper_bound(ranges, end, cp, [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != ranges && cp <= std::prev(it)->last;
}

template <size_t R, size_t S>
void AppendMapped(const CaseRun (&runs)[R], const CaseSpecial (&specials)[S], char32_t cp, std::string* out) {
  const auto* special =
      std::lower_bound(specials, specials + S, cp, [](const CaseSpecial& s, char32_t c) { return s.cp < c; });
  if (special != specials + S && special->cp == cp) {
    out->append(special->utf8);
    return;
  }
  const auto* end = runs + R;
  const auto* it = std::upper_bound(runs, end, cp, [](char32_t c, const CaseRun& r) { return c < r.first; });
  if (it != runs) {
    const CaseRun& run = *std::prev(it);
    const char32_t offset = cp - run.first;
    if (offset % run.stride == 0 && offset / run.stride < run.count) {
      AppendUtf8(static_cast<char32_t>(static_cast<int64_t>(cp) + run.delta), out);
      return;
    }
  }
  AppendUtf8(cp, out);
}

bool IsCaseIgnorable(char32_t cp) { return InRanges(kCaseIgnorable, cp); }

// U+03A3 lower-cases to final sigma U+03C2 when a cased letter precedes it and none
// follows (case-ignorable characters skipped both ways), as Python's str.lower() does.
bool IsFinalSigma(const std::vector<char32_t>& cps, size_t i) {
  size_t j = i;
  while (j > 0 && IsCaseIgnorable(cps[j - 1])) --j;
  if (j == 0 || !IsCased(cps[j - 1])) return false;
  size_t k = i + 1;
  while (k < cps.size() && IsCaseIgnorable(cps[k])) ++k;
  return k == cps.size() || !IsCased(cps[k]);
}

void AppendLower(const std::vector<char32_t>& cps, size_t i, std::string* out) {
  if (cps[i] == 0x3A3) {
    AppendUtf8(IsFinalSigma(cps, i) ? 0x3C2 : 0x3C3, out);
    return;
  }
  AppendMapped(kToLowerRuns, kToLowerSpecials, cps[i], out);
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    char32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    i += len;
  }
  return true;
}

char32_t NextCodePoint(std::string_view text, size_t* at) {
  const auto c = static_cast<unsigned char>(text[*at]);
  size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  len = std::min(len, text.size() - *at);
  char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[*at + k]) & 0x3F);
  *at += len;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::vector<char32_t> ToCodePoints(std::string_view text) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (size_t at = 0; at < text.size();) cps.push_back(NextCodePoint(text, &at));
  return cps;
}

std::string FromCodePoints(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

size_t CodePointCount(std::string_view text) {
  size_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

size_t ByteOffsetOfCodePoint(std::string_view text, size_t index) {
  size_t at = 0;
  for (size_t i = 0; i < index && at < text.size(); ++i) NextCodePoint(text, &at);
  return at;
}

bool IsPythonSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

bool IsLineBreak(char32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
         cp == 0x2028 || cp == 0x2029;
}

bool IsPrintable(char32_t cp) { return !InRanges(kNotPrintable, cp); }
bool IsLowercase(char32_t cp) { return InRanges(kLowercase, cp); }
bool IsUppercase(char32_t cp) { return InRanges(kUppercase, cp); }
bool IsTitlecase(char32_t cp) { return InRanges(kTitlecase, cp); }
bool IsCased(char32_t cp) { return IsLowercase(cp) || IsUppercase(cp) || IsTitlecase(cp); }

std::string PythonUpper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) AppendMapped(kToUpperRuns, kToUpperSpecials, NextCodePoint(text, &at), &out);
  return out;
}

std::string PythonLower(std::string_view text) {
  const std::vector<char32_t> cps = ToCodePoints(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < cps.size(); ++i) AppendLower(cps, i, &out);
  return out;
}

std::string PythonTitle(std::string_view text) {
  const std::vector<char32_t> cps = ToCodePoints(text);
  std::string out;
  out.reserve(text.size());
  bool previous_is_cased = false;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (previous_is_cased) {
      AppendLower(cps, i, &out);
    } else {
      AppendMapped(kToTitleRuns, kToTitleSpecials, cps[i], &out);
    }
    previous_is_cased = IsCased(cps[i]);
  }
  return out;
}

std::string PythonCapitalize(std::string_view text) {
  const std::vector<char32_t> cps = ToCodePoints(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0) {
      AppendMapped(kToTitleRuns, kToTitleSpecials, cps[i], &out);
    } else {
      AppendLower(cps, i, &out);
    }
  }
  return out;
}

bool PythonIsLower(std::string_view text) {
  bool cased = false;
  for (size_t at = 0; at < text.size();) {
    const char32_t cp = NextCodePoint(text, &at);
    if (IsUppercase(cp) || IsTitlecase(cp)) return false;
    if (IsLowercase(cp)) cased = true;
  }
  return cased;
}

bool PythonIsUpper(std::string_view text) {
  bool cased = false;
  for (size_t at = 0; at < text.size();) {
    const char32_t cp = NextCodePoint(text, &at);
    if (IsLowercase(cp) || IsTitlecase(cp)) return false;
    if (IsUppercase(cp)) cased = true;
  }
  return cased;
}

}  // namespace crossreg::jinja
