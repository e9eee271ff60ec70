// Population-based training's decisions (a sweep of method pbt,
// proto/sweep.proto PopulationBasedTraining) as pure functions of the
// members' scores: which members copy which (exploit) and the
// hyperparameters they go on with (explore). No training, no gRPC:
// `rl_local sweep` (trainer/local_sweep.h) acts on them.
#ifndef RL_RUNSPEC_PBT_H_
#define RL_RUNSPEC_PBT_H_

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "proto/sweep.pb.h"
#include "runspec/field_problems.h"

namespace rl {

using PbtParameters = std::map<std::string, google::protobuf::Value>;

// Defaults of `spec->pbt()` (interval a tenth of the budget, at least
// metric.last_points updates, fraction 0.25,
// factors [0.8, 1.2], resample probability 0.25) and its checks, each
// problem named by its path into `problems`. For method pbt: a population
// of at least 2, one seed per member, no early stopping, only ppo.* fields
// other than the normalisers varied. A pbt block on another method is a
// problem too.
void ResolvePbt(SweepSpec* spec, FieldProblems* problems);

// Env steps at which round `round` (0, 1, ...) ends: (round + 1) x
// interval_steps, at most the base's budget.
int64_t PbtRoundSteps(const SweepSpec& spec, int round);

// One value of `parameter` drawn from its distribution or values.
google::protobuf::Value DrawParameterValue(const SweepParameter& parameter,
                                           std::mt19937_64* rng);

// `from` explored: each parameter resampled with the spec's probability,
// else perturbed (a number times a random factor, kept in [min, max], an
// int rounded and moved by at least 1 where it can; a `values` parameter
// moved to a neighbouring value). `changes` (if given) gets
// "ppo.learning_rate 0.001 -> 0.0012 (x1.2)" for each parameter.
PbtParameters ExplorePbt(const SweepSpec& spec, const PbtParameters& from,
                         std::mt19937_64* rng,
                         std::vector<std::string>* changes = nullptr);

struct PbtMember {
  int trial = 0;
  double score = 0;  // NaN: no episode ended yet (ranks last)
  PbtParameters parameters;
};

struct PbtCopy {
  int trial = 0;  // copies
  int donor = 0;  // is copied
  double trial_score = 0;
  double donor_score = 0;
  PbtParameters parameters;  // the donor's, explored
  // "copied trial 2 (score 480.10, its own 35.20); ppo.learning_rate ..."
  std::string description;
};

// One round: members ranked by score (`maximize`: higher is better; NaN
// last; ties by trial number); each of the worst q = max(1, floor(n x
// fraction)) copies one of the best q drawn at random, unless its score is
// as good as that donor's. Fewer than 2 members: none.
std::vector<PbtCopy> PlanPbtRound(const SweepSpec& spec, bool maximize,
                                  const std::vector<PbtMember>& members,
                                  std::mt19937_64* rng);

}  // namespace rl

#endif  // RL_RUNSPEC_PBT_H_
