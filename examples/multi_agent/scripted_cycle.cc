#include "examples/multi_agent/scripted_cycle.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace rl {
namespace {

// Plane 0 of the window is 1 where a trail, a head or the outside of the
// board is; the player's head is its centre (size - 1, size - 1), heading
// up. room() floods the free cells from one cell, a step in the four
// directions at a time (a cross-shaped convolution).
constexpr char kSource[] = R"(
def room(self, free: Tensor, start: Tensor):
    reach = start * free
    cross = torch.tensor([[[[0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]]]])
    for _ in range(self.size * self.size):
        grown = torch.conv2d(reach.unsqueeze(1), cross, padding=1).squeeze(1)
        grown = (grown > 0.5).float() * free
        if torch.equal(grown, reach):
            break
        reach = grown
    return reach.sum([1, 2])

def forward(self, obs: Tensor):
    n = obs.size(0)
    w = 2 * self.size - 1
    c = self.size - 1
    free = 1.0 - obs.reshape([n, 2, w, w]).select(1, 0)
    ahead_free = free[:, c - 1, c] > 0.5
    left = torch.zeros_like(free)
    left[:, c, c - 1] = 1.0
    right = torch.zeros_like(free)
    right[:, c, c + 1] = 1.0
    room_left = self.room(free, left)
    room_right = self.room(free, right)
    coin = torch.randint(1, 3, [n]).long()
    turn = torch.where(room_left > room_right, torch.ones_like(coin),
                       torch.where(room_right > room_left,
                                   torch.full_like(coin, 2), coin))
    return torch.where(ahead_free, torch.zeros_like(turn), turn), torch.zeros([n])
)";

constexpr char kRandomSource[] = R"(
def forward(self, obs: Tensor):
    n = obs.size(0)
    return torch.randint(0, 3, [n]).long(), torch.zeros([n])
)";

}  // namespace

absl::StatusOr<torch::jit::Module> RandomCycle() {
  try {
    torch::jit::Module module("RandomCycle");
    module.define(kRandomSource);
    return module;
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("compiling the random player: ", e.what()));
  }
}

absl::StatusOr<torch::jit::Module> ScriptedCycle(int size) {
  if (size < 6 || size > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("size ", size,
                     ": a board side of 6 to 16, as "
                     "LightCycles-v0's kwargs.size"));
  }
  try {
    torch::jit::Module module("ScriptedCycle");
    module.register_attribute("size", c10::IntType::get(), size);
    module.define(kSource);
    return module;
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("compiling the scripted cycle: ", e.what()));
  }
}

}  // namespace rl
