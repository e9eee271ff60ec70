// Which actor each finished episode came from, and which actors' returns
// stand apart from the rest. The run's mean return pools every actor's
// episodes, so a placed actor that reports forged episodes inside the env's
// reward range moves it unflagged; this keeps each actor's episodes of the
// last updates apart and names an actor whose mean is far from the median of
// the actors' means, measured in standard errors of its mean (the median
// actor's spread): with three actors or more a lone forger is never
// the median; with two, both are named.
#ifndef RL_LEARNER_ACTOR_RETURNS_H_
#define RL_LEARNER_ACTOR_RETURNS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace rl {

class ActorReturns {
 public:
  struct Options {
    // The window: episodes of the last this many updates, the same span
    // of training for every actor (a slow actor's last 100 episodes would
    // reach back to older policies).
    int window_updates = 20;
    // An actor with fewer episodes than this in the window takes no part
    // in the comparison; it needs two actors that have them.
    int64_t min_episodes = 10;
    // |z| beyond this, and a distance from the median beyond `min_gap` of
    // its scale (max of |median| and the median actor's standard
    // deviation), stands apart.
    double z_threshold = 6.0;
    double min_gap = 0.1;
  };

  struct Summary {
    int actor_id = 0;
    int64_t episodes = 0;
    double mean = 0;
    // The median of the compared actors' means, how many they are, and
    // (mean - median) / (median standard deviation / sqrt(episodes)); 0
    // where the actor is not compared.
    double median = 0;
    int actors_compared = 0;
    double z = 0;
    bool stands_apart = false;
  };

  ActorReturns() : ActorReturns(Options{}) {}
  explicit ActorReturns(const Options& options) : options_(options) {}

  // Episodes `actor_id` finished in the update being gathered.
  void Add(int actor_id, absl::Span<const float> returns);
  // Closes the update: its episodes join the window, the oldest update's
  // leave it.
  void EndUpdate();

  // Every actor with episodes in the window, by actor id.
  std::vector<Summary> Summaries() const;
  // The actors that stand apart now and did not at the last call: each is
  // reported once until it stops standing apart.
  std::vector<Summary> NewlyApart();

  // "actor 3's 120 episodes of the last 20 updates average 264.0 against
  // 23.1, the median of 3 actors' means (z 41.2)".
  static std::string Describe(const Summary& s, int window_updates);

 private:
  struct Moments {
    int64_t n = 0;
    double sum = 0;
    double sum_sq = 0;
  };
  using Update = std::map<int, Moments>;

  Options options_;
  Update pending_;
  std::deque<Update> window_;
  std::set<int> reported_;
};

}  // namespace rl

#endif  // RL_LEARNER_ACTOR_RETURNS_H_
