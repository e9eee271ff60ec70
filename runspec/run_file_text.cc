// A run file's text layer: YAML or JSON text -> JSON text, within the limits
// of run_spec.h (size, UTF-8 without control characters, nesting, YAML
// aliases expanded). ParseRunSpec (run_spec.cc) reads the JSON into a
// RunSpec; sweep files share it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/json_quote.h"
#include "common/status.h"
#include "runspec/run_spec.h"
#include "yaml-cpp/depthguard.h"
#include "yaml-cpp/yaml.h"

namespace rl {
namespace {

// A YAML scalar as a JSON value: YAML's booleans and null become JSON
// literals, numbers stay numbers (so the JSON parser checks them against the
// field's type), everything else is a string (enum names, env ids).
std::string ScalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return JsonQuote(s);  // Quoted in the YAML.
  const std::string lower = absl::AsciiStrToLower(s);
  if (lower == "true" || lower == "yes" || lower == "on") return "true";
  if (lower == "false" || lower == "no" || lower == "off") return "false";
  if (lower == "null" || lower == "~" || s.empty()) return "null";
  double d;
  if (absl::SimpleAtod(s, &d) && std::isfinite(d) &&
      s.find_first_of("xX") == std::string::npos) {
    // JSON numbers may not start with '+' or '.', nor end with '.'.
    std::string n = s;
    if (n[0] == '+') n = n.substr(1);
    if (n[0] == '.') n = "0" + n;
    if (absl::StartsWith(n, "-.")) n = "-0" + n.substr(1);
    if (absl::EndsWith(n, ".")) n += "0";
    return n;
  }
  return JsonQuote(s);
}

// String fields whose values include "on" and "off", which plain YAML
// reads as booleans: there, YAML's true/yes/on are "on" and false/no/off
// are "off".
bool IsSwitchField(const std::string& path) {
  return path == "execution.cuda_graphs";
}

std::string SwitchToJson(const YAML::Node& node) {
  if (node.Tag() != "!") {
    const std::string lower = absl::AsciiStrToLower(node.Scalar());
    if (lower == "true" || lower == "yes" || lower == "on") {
      return JsonQuote("on");
    }
    if (lower == "false" || lower == "no" || lower == "off") {
      return JsonQuote("off");
    }
  }
  return ScalarToJson(node);
}

// " at line L, column C" (1-based) of byte `offset` of `text`.
std::string Position(absl::string_view text, size_t offset) {
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return absl::StrCat(" at line ", line, ", column ", offset - line_start + 1);
}

std::string Position(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return absl::StrCat(" at line ", mark.line + 1, ", column ", mark.column + 1);
}

// Length of the well-formed UTF-8 sequence at text[i] (1 to 4), or 0 if
// there is none (a stray continuation byte, an overlong form, a surrogate,
// beyond U+10FFFF, or cut off by the end of the text).
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char b = byte(i);
  if (b < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // Range of the second byte.
  if (b >= 0xc2 && b <= 0xdf) {
    n = 2;
  } else if (b >= 0xe0 && b <= 0xef) {
    n = 3;
    if (b == 0xe0) lo = 0xa0;  // Overlong.
    if (b == 0xed) hi = 0x9f;  // Surrogates.
  } else if (b >= 0xf0 && b <= 0xf4) {
    n = 4;
    if (b == 0xf0) lo = 0x90;  // Overlong.
    if (b == 0xf4) hi = 0x8f;  // Beyond U+10FFFF.
  } else {
    return 0;
  }
  if (i + n > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return n;
}

// Control characters other than tab, LF and CR: neither YAML nor JSON text
// has them, a binary file soon does.
bool IsControl(unsigned char b) {
  return (b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7f;
}

std::string HexByte(unsigned char b) {
  return absl::StrCat("0x", absl::Hex(b, absl::kZeroPad2));
}

// Size, then text: UTF-8 without control characters.
absl::Status CheckRunFileText(absl::string_view text) {
  if (text.size() > kMaxRunFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("run file is larger than ", kMaxRunFileBytes, " bytes"));
  }
  for (size_t i = 0; i < text.size();) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    if (IsControl(b)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "run file is not a text file: byte ", HexByte(b), Position(text, i)));
    }
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "run file is not UTF-8 text: byte ", HexByte(b), Position(text, i)));
    }
    i += n;
  }
  return absl::OkStatus();
}

absl::Status DepthError(const std::string& where) {
  return absl::InvalidArgumentError(absl::StrCat(
      "run file: nesting deeper than ", kMaxRunFileDepth, " levels", where));
}

// The protobuf JSON parser recurses once per level, and its own limit is
// neither ours nor named; so count brackets outside strings first.
absl::Status CheckJsonDepth(absl::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxRunFileDepth) return DepthError(Position(text, i));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

// YAML -> JSON text. yaml-cpp shares the node of an anchor among its
// aliases, so a small file can stand for a huge tree (or an endless one: an
// alias inside its own anchor); the conversion expands it, so it counts
// levels, values and bytes against the limits as it goes.
class YamlToJson {
 public:
  explicit YamlToJson(std::string* out) : out_(out) {}

  absl::Status Convert(const YAML::Node& node, const std::string& path,
                       int depth) {
    if (++values_ > kMaxRunFileValues) {
      return absl::InvalidArgumentError(absl::StrCat(
          "run file: expands to more than ", kMaxRunFileValues,
          " values (YAML aliases?) at ", path.empty() ? "<root>" : path));
    }
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        *out_ += "null";
        return absl::OkStatus();
      case YAML::NodeType::Scalar:
        *out_ += IsSwitchField(path) ? SwitchToJson(node) : ScalarToJson(node);
        if (out_->size() > kMaxRunFileExpandedBytes) {
          return absl::InvalidArgumentError(absl::StrCat(
              "run file: expands to more than ", kMaxRunFileExpandedBytes,
              " bytes (YAML aliases?) at ", path.empty() ? "<root>" : path));
        }
        return absl::OkStatus();
      case YAML::NodeType::Sequence: {
        if (depth > kMaxRunFileDepth) return DepthError(Position(node.Mark()));
        *out_ += "[";
        for (size_t i = 0; i < node.size(); ++i) {
          if (i) *out_ += ",";
          RETURN_IF_ERROR(
              Convert(node[i], absl::StrCat(path, "[", i, "]"), depth + 1));
        }
        *out_ += "]";
        return absl::OkStatus();
      }
      case YAML::NodeType::Map: {
        if (depth > kMaxRunFileDepth) return DepthError(Position(node.Mark()));
        *out_ += "{";
        bool first = true;
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) {
            return absl::InvalidArgumentError(
                absl::StrCat(path.empty() ? "<root>" : path,
                             ": keys must be plain field names"));
          }
          const std::string key = kv.first.Scalar();
          if (!first) *out_ += ",";
          first = false;
          *out_ += JsonQuote(key) + ":";
          RETURN_IF_ERROR(Convert(
              kv.second, path.empty() ? key : absl::StrCat(path, ".", key),
              depth + 1));
        }
        *out_ += "}";
        return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string* const out_;
  int64_t values_ = 0;
};

}  // namespace

absl::StatusOr<std::string> RunFileToJson(absl::string_view text,
                                          RunFileFormat format) {
  RETURN_IF_ERROR(CheckRunFileText(text));
  std::string json;
  if (format == RunFileFormat::kJson) {
    RETURN_IF_ERROR(CheckJsonDepth(text));
    return std::string(text);
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    // Its mark is where the parser had read to, past the deep point.
    return DepthError(absl::StrCat(" near line ", e.mark.line + 1));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("run file is not valid YAML: line ", e.mark.line + 1,
                     ", column ", e.mark.column + 1, ": ", e.msg));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        "run file: expected a mapping of fields at the top level");
  }
  RETURN_IF_ERROR(YamlToJson(&json).Convert(root, "", 1));
  return json;
}

}  // namespace rl
