// Python str semantics over UTF-8 bytes: code-point indexing, case mapping, whitespace, repr.
// Invalid UTF-8 bytes decode to U+DC80..U+DCFF (like Python's surrogateescape) and encode back unchanged.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::chat::text {

char32_t decode(std::string_view s, size_t& pos);
void encode(char32_t cp, std::string& out);
std::u32string to_u32(std::string_view s);
std::string from_u32(std::u32string_view s);
size_t length(std::string_view s);  // code points

bool is_space(char32_t cp);
bool is_alpha(char32_t cp);
bool is_digit(char32_t cp);
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);
bool is_printable(char32_t cp);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);   // str.capitalize()
std::string py_title(std::string_view s);     // str.title()
std::string jinja_title(std::string_view s);  // the |title filter (words split on whitespace and -([{<)
std::string swapcase(std::string_view s);

// str.strip / lstrip / rstrip: whitespace when chars is absent, else any of chars' code points.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep=None, maxsplit=-1) and str.rsplit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view rep, int64_t count);

std::string html_escape(std::string_view s);  // markupsafe.escape: & < > " '
std::string repr(std::string_view s);  // Python repr() of a str
std::string float_repr(double d);      // Python repr() of a float
// json.dumps of a str; ensure_ascii escapes everything outside ' '..'~' as \uXXXX.
void json_escape(std::string_view s, std::string& out, bool ensure_ascii = false);

}  // namespace tessera::chat::text
