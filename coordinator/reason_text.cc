#include "coordinator/reason_text.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rl {

std::string SanitizeReason(absl::string_view text) {
  constexpr size_t kMaxBytes = 2048;
  std::string out;
  out.reserve(std::min(text.size(), kMaxBytes));
  size_t i = 0;
  while (i < text.size() && out.size() < kMaxBytes) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // Line breaks stay (rlctl and the web page show them as such); every
    // other control is written out.
    if ((c < 0x20 && c != '\n') || c == 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
      ++i;
      continue;
    }
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    // A UTF-8 sequence: kept when well formed and not a control or a
    // direction override; else its bytes escaped.
    const int length = c >= 0xf0 && c < 0xf5   ? 4
                       : c >= 0xe0 && c < 0xf0 ? 3
                       : c >= 0xc2 && c < 0xe0 ? 2
                                               : 0;
    bool ok = length > 0 && i + length <= text.size();
    uint32_t code = length == 2   ? (c & 0x1f)
                    : length == 3 ? (c & 0x0f)
                                  : (c & 0x07);
    for (int k = 1; ok && k < length; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      ok = (next & 0xc0) == 0x80;
      code = (code << 6) | (next & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not
    // UTF-8: their bytes are escaped.
    const uint32_t least = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
    ok = ok && code >= least && !(code >= 0xd800 && code <= 0xdfff) &&
         code <= 0x10ffff;
    const bool control = (code >= 0x80 && code < 0xa0) ||
                         (code >= 0x200b && code <= 0x200f) ||
                         (code >= 0x202a && code <= 0x202e) ||
                         (code >= 0x2066 && code <= 0x2069);
    if (!ok) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
      ++i;
    } else if (control) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", code));
      i += length;
    } else {
      out.append(text.data() + i, length);
      i += length;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

}  // namespace rl
