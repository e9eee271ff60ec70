#include "runspec/pbt.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"

namespace rl {
namespace {

using google::protobuf::Value;

std::string Text(const Value& value) {
  if (value.has_number_value()) {
    return absl::StrFormat("%.4g", value.number_value());
  }
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(value, &json);
  return json;
}

bool Same(const Value& a, const Value& b) {
  std::string x, y;
  (void)google::protobuf::util::MessageToJsonString(a, &x);
  (void)google::protobuf::util::MessageToJsonString(b, &y);
  return x == y;
}

// Fields whose change alters what a checkpoint holds (the normalisers'
// state), so a copied checkpoint would not fit the member's run. `path` is
// of field names: ResolveSweepSpec rewrote lowerCamelCase ones before.
bool Structural(const std::string& path) {
  return path == "ppo.normalize_observations" ||
         path == "ppo.normalize_rewards";
}

std::string Score(double score) {
  return std::isnan(score) ? "none" : absl::StrFormat("%.2f", score);
}

// `x` times a random factor, kept in the parameter's range.
double Perturb(const SweepParameter& p, double x, double factor) {
  double y = x * factor;
  if (p.distribution() == "int") {
    const double lo = std::ceil(p.min()), hi = std::floor(p.max());
    y = std::clamp(std::round(y), lo, hi);
    // A small integer times 1.2 rounds back to itself, and one at a bound
    // clamps back to it: move it by one, the other way at a bound.
    if (y == x) {
      const double step = (factor > 1) == (x >= 0) ? 1 : -1;
      y = x + step >= lo && x + step <= hi ? x + step : x - step;
      y = std::clamp(y, lo, hi);
    }
    return y;
  }
  return std::clamp(y, p.min(), p.max());
}

}  // namespace

void ResolvePbt(SweepSpec* spec, FieldProblems* problems) {
  FieldProblems& p = *problems;
  if (spec->method() != "pbt") {
    if (spec->has_pbt()) {
      p.Add("pbt: only a sweep of method pbt takes a pbt block (method is \"" +
            spec->method() + "\")");
    }
    return;
  }
  PopulationBasedTraining* pbt = spec->mutable_pbt();
  const int64_t budget = spec->base().total_env_steps();
  // Every round holds at least `last_points` updates, so that a member's
  // score at a round is its own, not its donor's from before a copy.
  // Clamped: an unresolved base or metric (its problems reported
  // elsewhere) must not overflow the product.
  const int64_t batch =
      std::clamp<int64_t>(spec->base().envs_per_actor(), 0, 1 << 20) *
      std::clamp<int64_t>(spec->base().segment_length(), 0, 1 << 20);
  const int64_t least =
      batch * std::clamp<int64_t>(spec->metric().last_points(), 1, 1000);
  if (pbt->interval_steps() == 0 && budget > 0) {
    pbt->set_interval_steps(std::max<int64_t>({1, budget / 10, least}));
  }
  if (pbt->fraction() == 0) pbt->set_fraction(0.25);
  if (pbt->perturb_factors().empty()) {
    pbt->add_perturb_factors(0.8);
    pbt->add_perturb_factors(1.2);
  }
  if (!pbt->has_resample_probability()) pbt->set_resample_probability(0.25);

  if (pbt->interval_steps() < 1 ||
      (budget > 0 && pbt->interval_steps() >= budget)) {
    p.Add("pbt.interval_steps",
          absl::StrCat("must be in [1, base.total_env_steps = ", budget, ")"),
          pbt->interval_steps());
  }
  if (!(pbt->fraction() > 0 && pbt->fraction() <= 0.5)) {
    p.Add("pbt.fraction", "must be in (0, 0.5]", pbt->fraction());
  }
  if (pbt->perturb_factors_size() > 16) {
    p.Add("pbt.perturb_factors", "at most 16", pbt->perturb_factors_size());
  }
  for (int i = 0; i < pbt->perturb_factors_size(); ++i) {
    const double f = pbt->perturb_factors(i);
    if (!(std::isfinite(f) && f > 0 && f != 1)) {
      p.Add(absl::StrCat("pbt.perturb_factors[", i, "]"),
            "must be a finite number > 0 other than 1", f);
    }
  }
  if (!(pbt->resample_probability() >= 0 && pbt->resample_probability() <= 1)) {
    p.Add("pbt.resample_probability", "must be in [0, 1]",
          pbt->resample_probability());
  }
  if (batch > 0 && pbt->interval_steps() >= 1 &&
      pbt->interval_steps() < least) {
    p.Add("pbt.interval_steps",
          absl::StrCat(
              "must hold at least metric.last_points (",
              spec->metric().last_points(), ") updates of ", batch,
              " env steps (base.envs_per_actor x segment_length): >= ", least),
          pbt->interval_steps());
  }
  if (spec->max_trials() < 2) {
    p.Add("max_trials", "pbt needs a population of at least 2",
          spec->max_trials());
  }
  if (spec->seeds_per_config() != 1) {
    p.Add("seeds_per_config",
          "must be 1 for pbt: each member has its own seed (base.seed + its "
          "trial number)",
          spec->seeds_per_config());
  }
  if (spec->early_stopping().kind() != "none") {
    p.Add("early_stopping.kind",
          "must be none for pbt: its worst members copy better ones instead "
          "of stopping",
          absl::StrCat("\"", spec->early_stopping().kind(), "\""));
  }
  const std::map<std::string, SweepParameter> sorted(spec->parameters().begin(),
                                                     spec->parameters().end());
  for (const auto& [path, param] : sorted) {
    if (!absl::StartsWith(path, "ppo.") || Structural(path)) {
      p.Add(absl::StrCat(
          "parameters.", path,
          ": pbt copies weights, optimiser and normalisers between members, "
          "so it varies only ppo.* fields that keep them the same shape (not ",
          path, ")"));
    }
  }
}

int64_t PbtRoundSteps(const SweepSpec& spec, int round) {
  const int64_t budget = spec.base().total_env_steps();
  const int64_t steps = static_cast<int64_t>(round + 1) *
                        std::max<int64_t>(1, spec.pbt().interval_steps());
  return budget > 0 ? std::min(steps, budget) : steps;
}

Value DrawParameterValue(const SweepParameter& p, std::mt19937_64* rng) {
  Value v;
  if (p.values_size() > 0) {
    std::uniform_int_distribution<int> pick(0, p.values_size() - 1);
    v = p.values(pick(*rng));
  } else if (p.distribution() == "int") {
    std::uniform_int_distribution<int64_t> pick(
        static_cast<int64_t>(std::ceil(p.min())),
        static_cast<int64_t>(std::floor(p.max())));
    v.set_number_value(static_cast<double>(pick(*rng)));
  } else if (p.distribution() == "log_uniform") {
    std::uniform_real_distribution<double> u(std::log(p.min()),
                                             std::log(p.max()));
    v.set_number_value(std::exp(u(*rng)));
  } else {
    std::uniform_real_distribution<double> u(p.min(), p.max());
    v.set_number_value(u(*rng));
  }
  return v;
}

PbtParameters ExplorePbt(const SweepSpec& spec, const PbtParameters& from,
                         std::mt19937_64* rng,
                         std::vector<std::string>* changes) {
  const PopulationBasedTraining& pbt = spec.pbt();
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  PbtParameters out = from;
  for (auto& [path, value] : out) {
    auto it = spec.parameters().find(path);
    if (it == spec.parameters().end()) continue;
    const SweepParameter& param = it->second;
    const Value before = value;
    std::string how;
    if (coin(*rng) < pbt.resample_probability()) {
      value = DrawParameterValue(param, rng);
      how = "resampled";
    } else if (param.values_size() > 0) {
      int at = 0;
      for (int i = 0; i < param.values_size(); ++i) {
        if (Same(param.values(i), value)) at = i;
      }
      const int n = param.values_size();
      int step = coin(*rng) < 0.5 ? -1 : 1;
      if (at + step < 0 || at + step >= n) step = -step;
      if (n > 1) value = param.values(std::clamp(at + step, 0, n - 1));
      how = "a neighbouring value";
    } else if (!pbt.perturb_factors().empty()) {
      std::uniform_int_distribution<int> pick(0,
                                              pbt.perturb_factors_size() - 1);
      const double factor = pbt.perturb_factors(pick(*rng));
      value.set_number_value(Perturb(param, value.number_value(), factor));
      how = absl::StrFormat("x%g", factor);
    }
    if (changes != nullptr) {
      changes->push_back(absl::StrCat(path, " ", Text(before), " -> ",
                                      Text(value), " (", how, ")"));
    }
  }
  return out;
}

std::vector<PbtCopy> PlanPbtRound(const SweepSpec& spec, bool maximize,
                                  const std::vector<PbtMember>& members,
                                  std::mt19937_64* rng) {
  std::vector<PbtCopy> copies;
  const int n = static_cast<int>(members.size());
  if (n < 2) return copies;
  std::vector<const PbtMember*> order;
  for (const PbtMember& m : members) order.push_back(&m);
  const auto better = [&](double a, double b) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
    return maximize ? a > b : a < b;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const PbtMember* a, const PbtMember* b) {
                     if (better(a->score, b->score)) return true;
                     if (better(b->score, a->score)) return false;
                     return a->trial < b->trial;
                   });
  const int q = std::max(
      1, static_cast<int>(std::floor(n * spec.pbt().fraction() + 1e-9)));
  std::uniform_int_distribution<int> pick(0, q - 1);
  for (int k = n - q; k < n; ++k) {
    const PbtMember& loser = *order[k];
    const PbtMember& donor = *order[pick(*rng)];
    if (!better(donor.score, loser.score)) continue;
    PbtCopy copy;
    copy.trial = loser.trial;
    copy.donor = donor.trial;
    copy.trial_score = loser.score;
    copy.donor_score = donor.score;
    std::vector<std::string> changes;
    // Explore again where it changed nothing (clamped at a bound, the same
    // draw): a copy with its donor's settings would repeat it exactly.
    for (int attempt = 0; attempt < 8; ++attempt) {
      changes.clear();
      copy.parameters = ExplorePbt(spec, donor.parameters, rng, &changes);
      bool differs = false;
      for (const auto& [path, value] : copy.parameters) {
        differs = differs || !Same(value, donor.parameters.at(path));
      }
      if (differs) break;
    }
    copy.description =
        absl::StrCat("copied trial ", donor.trial, " (score ",
                     Score(donor.score), ", its own ", Score(loser.score), ")");
    for (const std::string& change : changes) {
      absl::StrAppend(&copy.description, "; ", change);
    }
    copies.push_back(std::move(copy));
  }
  return copies;
}

}  // namespace rl
