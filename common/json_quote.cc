#include "common/json_quote.h"

#include "absl/strings/str_cat.h"

namespace rl {

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string QuoteForError(absl::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return JsonQuote(s);
  size_t cut = max_bytes;
  // Back off UTF-8 continuation bytes, so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return absl::StrCat(JsonQuote(s.substr(0, cut)), "... (", s.size(),
                      " bytes)");
}

}  // namespace rl
