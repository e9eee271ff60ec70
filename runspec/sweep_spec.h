// Sweep files (proto/sweep.proto): parsed and validated like run files
// (every problem named by its field path), and expanded into trials: run
// specs, each the base run with one configuration of the parameters (a
// grid's combination or a random draw) and a seed. Also the early-stopping
// rules (ASHA, median) as pure functions of the scores at a rung. No gRPC:
// the coordinator stores and schedules what this produces.
#ifndef RL_RUNSPEC_SWEEP_SPEC_H_
#define RL_RUNSPEC_SWEEP_SPEC_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"
#include "proto/common.pb.h"
#include "proto/sweep.pb.h"
#include "runspec/run_spec.h"

namespace rl {

inline constexpr int kMaxSweepTrials = 1000;
inline constexpr int kMaxSweepConcurrency = 64;
inline constexpr int kMaxSweepSeedsPerConfig = 10;
inline constexpr int kMaxSweepParameters = 32;

// Parses a sweep file's text. A `base_run_file` is read relative to
// `base_dir` into `base` (LoadRunSpecFile's errors, prefixed with
// "base_run_file"); unknown fields are INVALID_ARGUMENT naming them. Then
// ResolveSweepSpec.
absl::StatusOr<SweepSpec> ParseSweepSpec(absl::string_view text,
                                         RunFileFormat format,
                                         const std::string& base_dir);
// The same, with `load_base` giving the run named by base_run_file (the
// coordinator's: the text that came with the sweep file).
using BaseRunLoader =
    std::function<absl::StatusOr<RunSpec>(const std::string& base_run_file)>;
absl::StatusOr<SweepSpec> ParseSweepSpec(absl::string_view text,
                                         RunFileFormat format,
                                         const BaseRunLoader& load_base);
// The same from a file (JSON for .json, YAML otherwise); NOT_FOUND if it
// cannot be read.
absl::StatusOr<SweepSpec> LoadSweepSpecFile(const std::string& path);

// Defaults (method random, 8 trials, concurrency 2, 1 seed per config,
// metric goal max over the last point, early stopping none / reduction
// factor 3 / 3 trials per rung), then every check: INVALID_ARGUMENT listing
// each problem as "field.path: problem (got value)", e.g.
// "parameters.ppo.learnin_rate: no such run-file field".
absl::Status ResolveSweepSpec(SweepSpec* spec);

// The run-file field at `path` (dotted; snake_case or lowerCamelCase
// names) under its field names ("ppo.learningRate" -> "ppo.learning_rate"),
// as a resolved sweep keeps its parameters; `path` itself where it names
// no field.
std::string RunFieldName(const std::string& path);

// Sets the run-file field at `path` (dotted; snake_case or lowerCamelCase
// names) of `spec` to `value`, as a run file writing that value there
// would (a list for a repeated field replaces it). INVALID_ARGUMENT naming
// the path for a field that does not exist or a value of the wrong type.
absl::Status SetRunField(RunSpec* spec, absl::string_view path,
                         const google::protobuf::Value& value);

struct SweepTrial {
  int index = 0;   // 0.. in the order of trials
  int config = 0;  // which configuration (trials of one share it)
  int seed_offset = 0;
  // Path -> value, in path order.
  std::map<std::string, google::protobuf::Value> parameters;
  RunSpec spec;  // resolved: ready to submit
};

// "ppo.learning_rate=0.001, ppo.num_epochs=10".
std::string DescribeParameters(
    const std::map<std::string, google::protobuf::Value>& parameters);

// Trial `index` of `spec` with the configuration `parameters` (number
// `config`) and seed base.seed + `seed_offset`: the base with the
// configuration applied, named "<sweep>-<index>", resolved.
// INVALID_ARGUMENT naming the trial and the run file's problem.
absl::StatusOr<SweepTrial> MakeSweepTrial(
    const SweepSpec& spec,
    const std::map<std::string, google::protobuf::Value>& parameters, int index,
    int config, int seed_offset);

// A configuration chosen outside the sweep (method external: Optuna's
// samplers in the Python client, through the coordinator's AddSweepTrial):
// exactly the sweep's parameters, each value one of its `values` or within
// its distribution's [min, max] (an integer for int). INVALID_ARGUMENT
// listing each problem as "parameters.<path>: ...".
absl::Status CheckConfiguration(
    const SweepSpec& spec,
    const std::map<std::string, google::protobuf::Value>& parameters);

// Every trial of a resolved sweep: configurations (grid combinations in
// order, or max_trials random draws from the sweep's seed; none for
// external, whose trials are added one by one) x seeds_per_config seeds. Each
// trial's spec is the base with the configuration applied, its seed base.seed +
// seed_offset, and its name
// "<sweep>-<index>", resolved. A configuration that makes an invalid run is
// INVALID_ARGUMENT naming the configuration and the run file's problem.
absl::StatusOr<std::vector<SweepTrial>> ExpandSweep(const SweepSpec& spec);

// Env steps at which rung `rung` (0, 1, ...) of `stopping` falls.
int64_t RungSteps(const EarlyStopping& stopping, int rung);

// Whether a trial whose score at a rung is `score` goes on, given the
// scores of every trial that reached that rung (its own included).
// `maximize`: higher is better. ASHA keeps the top
// ceil(n / reduction_factor); median keeps scores at least as good as the
// median. Fewer than min_trials_at_rung scores: every trial goes on.
bool KeepsGoing(const EarlyStopping& stopping, bool maximize, double score,
                const std::vector<double>& scores_at_rung);

}  // namespace rl

#endif  // RL_RUNSPEC_SWEEP_SPEC_H_
