// Regular expressions to GBNF (gbnf_parser.h's dialect), for regex-constrained output
// and for the `pattern` of JSON Schema strings. The syntax is the ECMAScript subset
// JSON Schema patterns are written in; the pattern and the text are UTF-8 and every
// construct works on code points.
//   Supported: literals; escapes \d \w \s \D \W \S (ASCII digits and word characters,
//     ECMAScript's white space), \n \t \r \f \v \0 \xHH \uHHHH (surrogate pairs joined)
//     \u{H...} \cX, and a backslash before any other non-alphanumeric character;
//     classes [a-z0-9_] and [^...] (\d \w \s and their negations inside; \b inside a
//     class is a backspace; [^] is any character); `.`, any character except the line
//     terminators \n \r U+2028 U+2029 (as in ECMAScript); groups ( ), (?: ), (?<name> )
//     and (?P<name> ) (names ignored); alternation |; quantifiers * + ? {m} {m,} {m,n}
//     with counts up to 1000, lazy ones (a trailing ?) read as greedy (the set of
//     strings is the same); ^ at the start and $ at the end of a top-level alternative.
//   Refused, "regex: <byte offset>: <construct> not supported": backreferences (\1,
//     \k<name>, (?P=name)), lookahead and lookbehind, ^ and $ anywhere else, \b \B \A
//     \Z \z \G, \p{...} property escapes, possessive quantifiers (a*+), inline flags
//     ((?i)), atomic groups, the empty class []. Other syntax errors read the same way.
// The output never holds raw control characters (\xHH, \uHHHH and \UHHHHHHHH escapes
// instead), so it is plain ASCII. Unbounded repetitions whose body can match the empty
// string are rewritten over an equivalent body that cannot ((a?b?)* as (a|b)*), so no
// output rule is left recursive.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg::grammar {

// Rules whose rule `<rule_prefix>` matches exactly the strings the whole pattern matches
// (anchors or not: the whole output must match). The caller adds `root ::= re` or
// refers to the rule from its own grammar. `rule_prefix` must be a GBNF rule name
// (letters, digits, '-').
absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern, std::string_view rule_prefix = "re");

// JSON Schema's `pattern`: rules whose rule `<rule_prefix>` matches the text between the
// quotes of a JSON string literal whose decoded value the pattern matches (ECMAScript
// search semantics: an alternative not anchored with ^ may be preceded, one not anchored
// with $ followed, by any characters; "abc" is read as .*abc.* and ^abc$ as abc). The
// rule `<rule_prefix>-any` (any one character) is defined too when needed. Each character
// is accepted in its canonical JSON spelling only: raw where JSON allows it, \" \\ \b
// \f \n \r \t, and \u00xx (lowercase hex) for the other control characters; other
// spellings of the same value (\/, \u0041) are not accepted, but every string the
// pattern matches has an accepted spelling.
absl::StatusOr<std::string> RegexToJsonStringGbnf(std::string_view pattern, std::string_view rule_prefix);

// Rules whose rule `<rule_prefix>` matches a JSON string literal, quotes included, in the
// canonical spelling above, whose value is none of `excluded` (UTF-8): the keys of an
// object's further members, which must not repeat its listed properties. Also defines
// `<rule_prefix>-any` and `<rule_prefix>-t<number>` (one rule per prefix of an excluded
// value).
absl::StatusOr<std::string> JsonStringExceptGbnf(const std::vector<std::string>& excluded,
                                                 std::string_view rule_prefix);

// `text` (UTF-8) as a GBNF string literal, quotes included, escaped so that it parses back
// to the same code points and holds only printable ASCII.
std::string GbnfQuote(std::string_view text);

}  // namespace crossreg::grammar
