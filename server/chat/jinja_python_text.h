// Python's conversions between numbers, values and text, byte for byte: repr() of a
// float and of a str, int() and float() of a string, and the two string formatting
// operators templates use ("%s" % x and "{}".format(x)).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

// repr(x) for a float: the shortest text that reads back as x ("0.1", "1.0", "1e+16",
// "1.5e-07", "inf", "nan").
std::string PythonFloatRepr(double value);

// repr(s) for a str: quoted, with the quote Python picks and its escapes.
std::string PythonStringRepr(std::string_view text);

// int(text, base) and float(text): surrounding whitespace and digit-separating
// underscores allowed. INVALID_ARGUMENT for text Python rejects, and for an int that does
// not fit 64 bits.
absl::StatusOr<int64_t> ParsePythonInt(std::string_view text, int base = 10);
absl::StatusOr<double> ParsePythonFloat(std::string_view text);

// `format % args`: %s %r %d %i %u %f %F %e %E %g %G %x %X %o %c %% with flags, width and
// precision, and %(name)s against a dict. A tuple gives the positional arguments.
absl::StatusOr<std::string> PercentFormat(std::string_view format, const Value& args);

// str.format(*positional, **keywords) for fields "{}", "{0}", "{name}" with optional "!s"
// or "!r"; a format spec (":>10") is refused as not supported.
absl::StatusOr<std::string> BraceFormat(std::string_view format, const CallArgs& args);

}  // namespace crossreg::jinja
