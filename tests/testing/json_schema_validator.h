// A JSON Schema validator for the subset engine/grammar/json_schema_grammar.h converts,
// written apart from the converter so that tests can judge documents (and generated
// output) independently of the grammar: type, enum, const, $ref ("#", "#/$defs/...",
// "#/definitions/..."), anyOf, oneOf (exactly one), allOf, properties, required,
// additionalProperties, items, prefixItems, items as an array with additionalItems,
// minItems, maxItems, uniqueItems, minLength/maxLength (code points), pattern (std::regex
// ECMAScript, searched; fine for ASCII patterns), format date/time/date-time/uuid (shape,
// field ranges, days within the month with 29 February always allowed) and the numeric
// bounds (also draft 4's boolean exclusive forms). Every keyword applies at once, as in
// JSON Schema (siblings of $ref included). Annotations are ignored; any other keyword is
// reported, so that a schema outside the subset cannot pass silently.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace crossreg::testing {

// "" when `doc` is valid under `schema`, else the path of the first violation and what
// it is ("$.items[2].name: expected type string").
std::string ValidateJsonAgainstSchema(const nlohmann::ordered_json& doc, const nlohmann::ordered_json& schema);

}  // namespace crossreg::testing
