// JSON Schema to GBNF (gbnf_parser.h's dialect): the `root` rule matches the JSON texts
// valid under the schema, written in a serialization subset that still spells every
// valid value:
//   - compact: no whitespace outside strings (the rule `ws ::= ""` stands where
//     JSON allows whitespace), so everything between values is forced text: fixed keys,
//     quotes, colons, commas and brackets cost the model no choice and are drafted
//     without one (GrammarState::ForcedTokens);
//   - object members in the order of the schema's `properties` (see below);
//   - strings: any character JSON allows raw, the escapes \" \\ \/ \b \f \n \r \t, and
//     \uXXXX (surrogates only as a high-low pair, which minLength/maxLength count as one
//     character); strings under `pattern`, `format`, `enum` and `const` in their
//     canonical spelling only (regex_grammar.h); numbers as JSON spells them (no leading zeros, optional
//     fraction and exponent) with at most 16 digits before the point, 16 after it and a
//     2-digit exponent (every double stays writable; a model cannot add digits forever),
//     integers without fraction or exponent; `enum` and `const`
//     values compact, as nlohmann::json dumps them.
// Supported keywords (anything else is refused, see below):
//   type (a name or an array of names); enum; const; $ref to "#", "#/$defs/<name>" or
//   "#/definitions/<name>" (recursion allowed through an object or array); anyOf; oneOf
//   (as anyOf: that exactly one alternative matches is not enforced); allOf with a single
//   subschema; properties, required, additionalProperties; items, prefixItems, items as
//   an array with additionalItems (draft 7 tuples), minItems, maxItems, uniqueItems
//   false (the four counts up to 1000, gbnf_parser.h's repetition limit); minLength,
//   maxLength (code points), pattern, format date, time, date-time, uuid; for integers
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum (exact, also the draft-4
//   boolean exclusive forms, bounds up to 1e15 in magnitude); for numbers only a lower
//   bound of 0 (minimum 0: no minus sign, so -0 is not spelled; exclusiveMinimum 0:
//   positive).
//   Annotations (title, description, $schema, $id, default, examples, $comment) and
//   $defs / definitions containers are ignored. `{}` and `true` accept any JSON value.
//   As in JSON Schema, type-specific keywords constrain only values of their type: a
//   schema without `type` admits every type.
// Objects: the properties listed in `properties` come first, in that order; the
//   `required` ones must appear, the others may be left out. Then, unless
//   additionalProperties is false, any number of further "key": value members, values
//   matching the additionalProperties schema (any JSON value when it is true or absent),
//   keys in canonical spelling and other than the listed names (a listed property can
//   neither come twice nor slip in as a further member with another value; further
//   keys may repeat each other). A required name missing from `properties` is appended
//   to them with the additionalProperties schema.
// Refused (InvalidArgumentError), the message starting with the JSON path of the
//   offending place, then what is wrong: "json_schema.not: not supported",
//   "json_schema.properties.age.maximum: ... not supported", "json_schema.allOf: ...".
//   Also refused: enum/const next to keywords other than `type`; $ref, anyOf, oneOf
//   and allOf next to assertion keywords; pattern or format together with
//   minLength/maxLength; schemas that match nothing (minItems > maxItems, a required
//   property whose schema is false, ...); a $ref cycle that consumes nothing (left
//   recursion).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace crossreg::grammar {

// `schema_json` is the schema as JSON text. The rule matching it is `root_name` (a
// grammar that embeds the JSON in text of its own names it otherwise and defines root
// itself); the other rules' names never take it.
absl::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema_json, std::string_view root_name = "root");

// Any JSON object (OpenAI's response_format {"type": "json_object"}), with the same
// whitespace policy and values of any type.
std::string JsonObjectGbnf();

}  // namespace crossreg::grammar
