// JSON Schema to grammar: the texts a model may write for response_format json_schema (and,
// with the schema {"type": "object"}, json_object).
//
// The grammar's sentences are JSON texts that satisfy the schema, in valid UTF-8. Around the
// value and each structural character the whitespace is nothing, one space, or one newline and
// up to 20 spaces or tabs: compact and pretty-printed output both read, but a model cannot pad
// forever (small models otherwise fill their budget with newlines).
//
// Supported: type (one or a list), properties, required, additionalProperties (false, true or a
// schema; absent counts as false, as OpenAI's strict mode requires it), items, minItems,
// maxItems, minLength, maxLength, pattern (grammar/regex.h; a match anywhere in the string
// unless anchored), enum, const, anyOf, oneOf (taken as anyOf), allOf of one
// schema, $ref to "#", "#/$defs/..." or "#/definitions/...", and the boolean schemas. Object
// properties come in the order the schema lists them; each optional one may be left out.
// Annotations (title, description, default, examples, format, ...) are ignored. Any other
// keyword (minimum, uniqueItems, ...) is refused with a tessera::Error naming it, as is a schema
// whose grammar would be left-recursive. With `loose` (tools' parameters, which clients write
// for documentation as much as for checking) such keywords are left out instead, as is a
// pattern the regular expressions cannot hold, and a pattern beside minLength or maxLength keeps
// only the pattern: the output keeps the schema's shape and types but may break those bounds.
#pragma once
#include <memory>

#include <nlohmann/json_fwd.hpp>

#include "grammar/grammar.h"

namespace tessera::grammar {

// The schema as parsed with its members' order kept (the order properties are written in).
std::shared_ptr<const Grammar> json_schema_grammar(const nlohmann::ordered_json& schema, bool loose = false);

}  // namespace tessera::grammar
