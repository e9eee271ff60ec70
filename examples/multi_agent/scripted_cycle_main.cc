// Writes LightCycles-v0's scripted player (or, with --player=random, a
// player of random moves) as a TorchScript file, for a league's members
// (docs/multi_agent.md#members-of-other-kinds):
//   bazel-bin/examples/multi_agent/scripted_cycle --size=8
//   --output=/tmp/scripted_cycle.pt
#include <cstdio>
#include <exception>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "examples/multi_agent/scripted_cycle.h"

ABSL_FLAG(int, size, 8, "The board side S (LightCycles-v0's kwargs.size).");
ABSL_FLAG(std::string, output, "", "The TorchScript file to write.");
ABSL_FLAG(std::string, player, "scripted",
          "scripted: the environment's scripted cycle (straight, else the "
          "side with more room); random: uniform random moves.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty()) {
    std::fprintf(stderr, "--output: the TorchScript file to write\n");
    return 2;
  }
  const std::string kind = absl::GetFlag(FLAGS_player);
  if (kind != "scripted" && kind != "random") {
    std::fprintf(stderr, "--player=%s: scripted or random\n", kind.c_str());
    return 2;
  }
  absl::StatusOr<torch::jit::Module> player =
      kind == "random" ? rl::RandomCycle()
                       : rl::ScriptedCycle(absl::GetFlag(FLAGS_size));
  if (!player.ok()) {
    std::fprintf(stderr, "%s\n", player.status().ToString().c_str());
    return 2;
  }
  try {
    player->save(output);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "writing %s: %s\n", output.c_str(), e.what());
    return 1;
  }
  std::printf("wrote %s: LightCycles-v0's %s player, board %dx%d\n",
              output.c_str(), kind.c_str(), absl::GetFlag(FLAGS_size),
              absl::GetFlag(FLAGS_size));
  return 0;
}
