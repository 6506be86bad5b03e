// Bytes from outside lina (a checkpoint's header, a tensor name, a text
// file) made safe to quote in a one-line message.
#pragma once
#include <string>
#include <string_view>

namespace lina {

// Keeps printable ASCII and well-formed UTF-8; writes control characters,
// DEL and every byte that is not part of a well-formed UTF-8 sequence as
// \xNN (\n, \r, \t as themselves escaped), so the result is one line that
// no terminal interprets. Longer than `max_bytes` (of the result), it is cut
// at a character boundary and ends with "... (N more bytes)".
std::string printable(std::string_view bytes, size_t max_bytes = 120);

// printable() between single quotes: how a message quotes a value from a file.
inline std::string in_quotes(std::string_view bytes, size_t max_bytes = 80) {
  return "'" + printable(bytes, max_bytes) + "'";
}

}  // namespace lina
