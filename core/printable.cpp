#include "core/printable.h"

#include <cstdint>
#include <cstdio>

namespace lina {

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i] (2–4 bytes), or
// 0 when there is none (RFC 3629: no overlong forms, no surrogates, ≤ U+10FFFF)
// or when it encodes a C1 control character, which terminals act on.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return uint8_t(s[k]); };
  auto cont = [&](size_t k) { return k < s.size() && (byte(k) & 0xC0) == 0x80; };
  uint8_t b = byte(i);
  if (b == 0xC2 && cont(i + 1) && byte(i + 1) < 0xA0) return 0;  // C1 controls (U+0080–U+009F)
  if (b >= 0xC2 && b <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    uint8_t b1 = byte(i + 1);
    if (b == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b == 0xED && b1 > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    uint8_t b1 = byte(i + 1);
    if (b == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b == 0xF4 && b1 > 0x8F) return 0;  // beyond U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

std::string printable(std::string_view bytes, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    std::string piece;
    uint8_t b = uint8_t(bytes[i]);
    size_t used = 1;
    if (b == '\n') piece = "\\n";
    else if (b == '\r') piece = "\\r";
    else if (b == '\t') piece = "\\t";
    else if (b >= 0x20 && b < 0x7F) piece = char(b);
    else if (size_t n = b >= 0x80 ? utf8_sequence_length(bytes, i) : 0; n > 0) {
      piece = std::string(bytes.substr(i, n));
      used = n;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", b);
      piece = hex;
    }
    if (out.size() + piece.size() > max_bytes) {
      out += "... (" + std::to_string(bytes.size() - i) + " more bytes)";
      return out;
    }
    out += piece;
    i += used;
  }
  return out;
}

}  // namespace lina
