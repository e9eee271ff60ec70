#include "common/command_line.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace rl {
namespace {

// The first problem absl would exit 1 for, or "" if every flag is known and
// its value parses. absl's own flags (--help, --flagfile, ...) are left to
// absl.
std::string FirstBadFlag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      continue;  // positional; reported after parsing
    }
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    // absl's other usage flags (--helpfull, ...): absl handles them.
    if (name == "helpfull" || name == "helpshort" || name == "helppackage" ||
        name == "version" || name == "helpon" || name == "helpmatch" ||
        name == "only_check_args") {
      continue;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) {
      absl::string_view negated = name;
      if (absl::ConsumePrefix(&negated, "no") &&
          eq == absl::string_view::npos) {
        absl::CommandLineFlag* bool_flag = absl::FindCommandLineFlag(negated);
        if (bool_flag != nullptr && bool_flag->IsOfType<bool>()) continue;
      }
      return absl::StrCat("unknown flag --", name);
    }
    if (absl::StrContains(flag->Filename(), "absl/")) continue;
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (flag->IsOfType<bool>()) {
      continue;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::StrCat("--", name, ": missing value");
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::StrCat("--", name, ": ", error);
    }
  }
  return "";
}

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-help" || arg == "-h") return true;
  }
  return false;
}

// The usage line, then every flag defined outside absl and gRPC: name,
// default and help, sorted by name.
void PrintHelp(absl::string_view usage) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    const std::string file = flag->Filename();
    if (absl::StrContains(file, "absl/") || absl::StrContains(file, "grpc")) {
      continue;
    }
    flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::printf("usage: %s\n\nflags:\n", std::string(usage).c_str());
  for (const absl::CommandLineFlag* flag : flags) {
    std::printf(
        "  --%s (default: %s)\n      %s\n", std::string(flag->Name()).c_str(),
        flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue().c_str(),
        flag->Help().c_str());
  }
}

}  // namespace

std::vector<std::string> ParseCommandLineOrExit(int argc, char** argv,
                                                absl::string_view usage,
                                                int max_positional) {
  // absl allows one usage message per process (tests parse repeatedly).
  static absl::once_flag usage_set;
  absl::call_once(usage_set, [usage] { absl::SetProgramUsageMessage(usage); });
  if (AsksForHelp(argc, argv)) {
    PrintHelp(usage);
    std::fflush(stdout);
    std::exit(0);
  }
  const std::string bad = FirstBadFlag(argc, argv);
  if (!bad.empty()) {
    std::fprintf(stderr, "error: %s\n", bad.c_str());
    std::exit(2);
  }
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (static_cast<int>(args.size()) > 1 + max_positional) {
    std::fprintf(stderr, "error: unexpected argument \"%s\"\n",
                 args[1 + max_positional]);
    std::exit(2);
  }
  return std::vector<std::string>(args.begin() + 1, args.end());
}

int ExitCode(const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace rl
