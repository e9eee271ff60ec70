#include "runspec/sweep_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/util/json_util.h"
#include "runspec/field_problems.h"
#include "runspec/named_policies.h"
#include "runspec/pbt.h"

namespace rl {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Value;

// Protobuf's JSON errors on one line (they may carry a caret drawing).
std::string OneLine(absl::string_view message) {
  std::vector<absl::string_view> words =
      absl::StrSplit(message, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
  while (!words.empty() && words.back() == "^") words.pop_back();
  return absl::StrJoin(words, " ");
}

std::string ValueJson(const Value& value) {
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(value, &json).ok()) {
    return "?";
  }
  return json;
}

// The fields along `path` from RunSpec, or why there are none.
absl::StatusOr<std::vector<const FieldDescriptor*>> RunFieldPath(
    absl::string_view path) {
  std::vector<const FieldDescriptor*> fields;
  const Descriptor* message = RunSpec::descriptor();
  const std::vector<absl::string_view> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    if (message == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("no such run-file field: ",
                       absl::StrJoin(parts.begin(), parts.begin() + i, "."),
                       " has no fields"));
    }
    const FieldDescriptor* field = nullptr;
    for (int f = 0; f < message->field_count(); ++f) {
      const FieldDescriptor* candidate = message->field(f);
      if (candidate->name() == parts[i] || candidate->json_name() == parts[i]) {
        field = candidate;
        break;
      }
    }
    if (field == nullptr || field->options().deprecated()) {
      return absl::InvalidArgumentError("no such run-file field");
    }
    fields.push_back(field);
    message = field->is_repeated() || field->is_map() ? nullptr
              : field->type() == FieldDescriptor::TYPE_MESSAGE
                  ? field->message_type()
                  : nullptr;
  }
  return fields;
}

// Each parameter under its path of proto field names (snake_case; a file
// may write lowerCamelCase JSON names too), so that every later check
// (pbt's refusals among them), the trials and the stored sweep see one
// name per field. Two paths of one field are a problem naming both. A path
// that names no field is kept as written (its problem is reported later).
void UseFieldNames(SweepSpec* spec, FieldProblems* p) {
  const std::map<std::string, SweepParameter> written(
      spec->parameters().begin(), spec->parameters().end());
  std::map<std::string, std::string> seen;  // field path -> path written
  spec->mutable_parameters()->clear();
  for (const auto& [path, parameter] : written) {
    const std::string name = RunFieldName(path);
    const auto [first, inserted] = seen.emplace(name, path);
    if (!inserted) {
      p->Add(absl::StrCat("parameters.", first->second, " and parameters.",
                          path, ": both name the run-file field ", name,
                          "; give it once"));
      continue;
    }
    (*spec->mutable_parameters())[name] = parameter;
  }
}

bool IsNumber(const FieldDescriptor* f) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return !f->is_repeated();
    default:
      return false;
  }
}

bool IsInteger(const FieldDescriptor* f) {
  return IsNumber(f) && f->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE &&
         f->cpp_type() != FieldDescriptor::CPPTYPE_FLOAT;
}

using Problems = FieldProblems;

// Configurations of the parameters (path -> value), in trial order.
using Config = std::map<std::string, Value>;

std::vector<Config> GridConfigs(const SweepSpec& spec) {
  std::vector<Config> configs = {Config()};
  // std::map keeps the paths sorted: the first path varies slowest.
  const std::map<std::string, SweepParameter> sorted(spec.parameters().begin(),
                                                     spec.parameters().end());
  for (const auto& [path, parameter] : sorted) {
    std::vector<Config> next;
    for (const Config& config : configs) {
      for (const Value& value : parameter.values()) {
        Config c = config;
        c[path] = value;
        next.push_back(std::move(c));
        if (static_cast<int>(next.size()) >= kMaxSweepTrials * 1000) break;
      }
    }
    configs = std::move(next);
  }
  if (static_cast<int>(configs.size()) > spec.max_trials()) {
    configs.resize(spec.max_trials());
  }
  return configs;
}

std::vector<Config> RandomConfigs(const SweepSpec& spec) {
  std::mt19937_64 rng(spec.seed());
  const std::map<std::string, SweepParameter> sorted(spec.parameters().begin(),
                                                     spec.parameters().end());
  std::vector<Config> configs;
  for (int t = 0; t < spec.max_trials(); ++t) {
    Config config;
    for (const auto& [path, p] : sorted) {
      config[path] = DrawParameterValue(p, &rng);
    }
    configs.push_back(std::move(config));
  }
  return configs;
}

int64_t GridSize(const SweepSpec& spec) {
  int64_t n = 1;
  for (const auto& [path, p] : spec.parameters()) {
    n *= std::max(1, p.values_size());
    n = std::min<int64_t>(n, int64_t{1} << 40);
  }
  return n;
}

}  // namespace

std::string RunFieldName(const std::string& path) {
  absl::StatusOr<std::vector<const FieldDescriptor*>> fields =
      RunFieldPath(path);
  if (!fields.ok()) return path;
  std::vector<std::string> names;
  for (const FieldDescriptor* f : *fields) names.emplace_back(f->name());
  return absl::StrJoin(names, ".");
}

absl::Status SetRunField(RunSpec* spec, absl::string_view path,
                         const Value& value) {
  auto fields = RunFieldPath(path);
  if (!fields.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", fields.status().message()));
  }
  Message* parent = spec;
  for (size_t i = 0; i + 1 < fields->size(); ++i) {
    parent = parent->GetReflection()->MutableMessage(parent, (*fields)[i]);
  }
  const FieldDescriptor* field = fields->back();
  // As a run file writing it: {"<field>": <value>} parsed into the parent's
  // type, then merged over the cleared field.
  std::unique_ptr<Message> written(parent->New());
  const std::string json =
      absl::StrCat("{\"", field->json_name(), "\": ", ValueJson(value), "}");
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(json, written.get(), options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the value ", ValueJson(value), " does not fit the field (",
        OneLine(status.message().as_string()), ")"));
  }
  parent->GetReflection()->ClearField(parent, field);
  parent->MergeFrom(*written);
  return absl::OkStatus();
}

absl::Status ResolveSweepSpec(SweepSpec* spec) {
  Problems p;
  if (spec->method().empty()) spec->set_method("random");
  if (spec->max_trials() == 0) spec->set_max_trials(8);
  if (spec->concurrency() == 0) spec->set_concurrency(2);
  if (spec->seeds_per_config() == 0) spec->set_seeds_per_config(1);
  SweepMetric* metric = spec->mutable_metric();
  if (metric->goal().empty()) metric->set_goal("max");
  if (metric->last_points() == 0) metric->set_last_points(1);
  EarlyStopping* stopping = spec->mutable_early_stopping();
  if (stopping->kind().empty()) stopping->set_kind("none");
  if (stopping->reduction_factor() == 0) stopping->set_reduction_factor(3);
  if (stopping->min_trials_at_rung() == 0) {
    stopping->set_min_trials_at_rung(3);
  }

  RunSpec base = spec->base();
  const RunSpec written_base = base;  // the policies' own fields as given
  if (base.env().id().empty()) {
    p.Add(
        "base: the sweep needs a base run (base_run_file, or base with "
        "at least env.id)");
  } else if (absl::Status resolved = ResolveRunSpec(&base); !resolved.ok()) {
    p.Add(absl::StrCat("base: ", resolved.message()));
  } else {
    *spec->mutable_base() = base;
  }
  // Named after the base run (its env without a name).
  if (spec->name().empty()) spec->set_name(base.name());
  if (spec->name().empty() && !base.env().id().empty()) {
    spec->set_name(absl::StrCat(base.env().id(), "-sweep"));
  }
  if (spec->name().size() > 100) {
    p.Add("name", "at most 100 characters", spec->name().size());
  }
  if (spec->method() != "grid" && spec->method() != "random" &&
      spec->method() != "external" && spec->method() != "pbt") {
    p.Add("method", "must be grid, random, external or pbt",
          absl::StrCat("\"", spec->method(), "\""));
  }
  if (spec->parameters().empty()) {
    p.Add("parameters: name at least one run-file field to vary");
  }
  if (spec->parameters_size() > kMaxSweepParameters) {
    p.Add("parameters", absl::StrCat("at most ", kMaxSweepParameters),
          spec->parameters_size());
  }
  UseFieldNames(spec, &p);
  const std::map<std::string, SweepParameter> sorted(spec->parameters().begin(),
                                                     spec->parameters().end());
  for (const auto& [path, param] : sorted) {
    const std::string at = absl::StrCat("parameters.", path);
    auto fields = RunFieldPath(path);
    if (!fields.ok()) {
      p.Add(absl::StrCat(at, ": ", fields.status().message()));
      continue;
    }
    const FieldDescriptor* field = fields->back();
    if (const std::string policy = PolicySettingField(written_base, path);
        !policy.empty()) {
      p.Add(absl::StrCat(at, ": ", policy, " sets ", path,
                         " itself, over the run's: the sweep would not change "
                         "it for that policy"));
      continue;
    }
    if (path == "seed" || path == "name") {
      p.Add(absl::StrCat(at,
                         ": set by the sweep itself (seeds_per_config "
                         "and the trial's name)"));
      continue;
    }
    const bool has_values = param.values_size() > 0;
    const bool has_distribution = !param.distribution().empty();
    if (has_values == has_distribution) {
      p.Add(absl::StrCat(at,
                         ": give either values or a distribution with "
                         "min and max"));
      continue;
    }
    if (param.values_size() > kMaxSweepTrials) {
      p.Add(absl::StrCat(at, ".values"), "at most 1000 values",
            param.values_size());
    }
    for (int i = 0; i < param.values_size(); ++i) {
      RunSpec probe;
      if (absl::Status set = SetRunField(&probe, path, param.values(i));
          !set.ok()) {
        p.Add(absl::StrCat(at, ".values[", i, "]: ", set.message()));
      }
    }
    if (!has_distribution) continue;
    if (spec->method() == "grid") {
      p.Add(absl::StrCat(at, ".distribution: a grid takes values only"));
      continue;
    }
    const std::string& d = param.distribution();
    if (d != "uniform" && d != "log_uniform" && d != "int") {
      p.Add(absl::StrCat(at, ".distribution"),
            "must be uniform, log_uniform or int", absl::StrCat("\"", d, "\""));
      continue;
    }
    if (!IsNumber(field)) {
      p.Add(absl::StrCat(at, ".distribution: ", path,
                         " is not a number; give values instead"));
      continue;
    }
    if (d != "int" && IsInteger(field)) {
      p.Add(
          absl::StrCat(at, ".distribution: ", path, " is an integer; use int"));
    }
    if (!(std::isfinite(param.min()) && std::isfinite(param.max()) &&
          param.min() <= param.max() &&
          (d == "int" ? std::ceil(param.min()) <= std::floor(param.max())
                      : param.min() < param.max()))) {
      p.Add(absl::StrCat(at, ": min must be below max, both finite (got min ",
                         param.min(), ", max ", param.max(), ")"));
    } else if (d == "log_uniform" && param.min() <= 0) {
      p.Add(absl::StrCat(at, ".min"), "must be > 0 for log_uniform",
            param.min());
    }
  }
  if (metric->series().empty()) {
    p.Add(
        "metric.series: name the telemetry series to optimise (e.g. "
        "learner/mean_return)");
  }
  if (metric->goal() != "max" && metric->goal() != "min") {
    p.Add("metric.goal", "must be max or min",
          absl::StrCat("\"", metric->goal(), "\""));
  }
  if (metric->last_points() < 1 || metric->last_points() > 1000) {
    p.Add("metric.last_points", "must be in [1, 1000]", metric->last_points());
  }
  if (spec->max_trials() < 1 || spec->max_trials() > kMaxSweepTrials) {
    p.Add("max_trials", absl::StrCat("must be in [1, ", kMaxSweepTrials, "]"),
          spec->max_trials());
  }
  if (spec->concurrency() < 1 || spec->concurrency() > kMaxSweepConcurrency) {
    p.Add("concurrency",
          absl::StrCat("must be in [1, ", kMaxSweepConcurrency, "]"),
          spec->concurrency());
  }
  if (spec->seeds_per_config() < 1 ||
      spec->seeds_per_config() > kMaxSweepSeedsPerConfig) {
    p.Add("seeds_per_config",
          absl::StrCat("must be in [1, ", kMaxSweepSeedsPerConfig, "]"),
          spec->seeds_per_config());
  }
  const int64_t configs =
      spec->method() == "grid"
          ? std::min<int64_t>(GridSize(*spec), spec->max_trials())
          : spec->max_trials();
  if (configs * std::max(1, spec->seeds_per_config()) > kMaxSweepTrials) {
    p.Add("seeds_per_config",
          absl::StrCat("configurations x seeds must be at most ",
                       kMaxSweepTrials),
          configs * spec->seeds_per_config());
  }
  const std::string& kind = stopping->kind();
  if (kind != "none" && kind != "asha" && kind != "median") {
    p.Add("early_stopping.kind", "must be none, asha or median",
          absl::StrCat("\"", kind, "\""));
  } else if (kind != "none") {
    if (stopping->first_rung_steps() < 1 ||
        (base.total_env_steps() > 0 &&
         stopping->first_rung_steps() >= base.total_env_steps())) {
      p.Add("early_stopping.first_rung_steps",
            absl::StrCat("must be in [1, base.total_env_steps = ",
                         base.total_env_steps(), ")"),
            stopping->first_rung_steps());
    }
    if (stopping->reduction_factor() < 2 ||
        stopping->reduction_factor() > 100) {
      p.Add("early_stopping.reduction_factor", "must be in [2, 100]",
            stopping->reduction_factor());
    }
    if (stopping->min_trials_at_rung() < 1) {
      p.Add("early_stopping.min_trials_at_rung", "must be >= 1",
            stopping->min_trials_at_rung());
    }
  }
  ResolvePbt(spec, &p);
  return p.ToStatus();
}

absl::StatusOr<SweepSpec> ParseSweepSpec(absl::string_view text,
                                         RunFileFormat format,
                                         const std::string& base_dir) {
  return ParseSweepSpec(
      text, format,
      [&](const std::string& base_run_file) -> absl::StatusOr<RunSpec> {
        const fs::path path = fs::path(base_run_file).is_absolute()
                                  ? fs::path(base_run_file)
                                  : fs::path(base_dir) / base_run_file;
        return LoadRunSpecFile(path.string());
      });
}

absl::StatusOr<SweepSpec> ParseSweepSpec(absl::string_view text,
                                         RunFileFormat format,
                                         const BaseRunLoader& load_base) {
  auto json = RunFileToJson(text, format);
  if (!json.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep file: ",
                     absl::StripPrefix(json.status().message(), "run file: ")));
  }
  SweepSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(*json, &spec, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep file: ", OneLine(status.message().as_string())));
  }
  if (!spec.base_run_file().empty()) {
    if (spec.has_base()) {
      return absl::InvalidArgumentError(
          "sweep file: base and base_run_file: give one of them");
    }
    auto base = load_base(spec.base_run_file());
    if (!base.ok()) {
      return absl::Status(
          base.status().code(),
          absl::StrCat("base_run_file: ", base.status().message()));
    }
    *spec.mutable_base() = *std::move(base);
  }
  RETURN_IF_ERROR(ResolveSweepSpec(&spec));
  return spec;
}

absl::StatusOr<SweepSpec> LoadSweepSpecFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  }
  std::string text(kMaxRunFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  const RunFileFormat format = absl::EndsWith(path, ".json")
                                   ? RunFileFormat::kJson
                                   : RunFileFormat::kYaml;
  auto spec =
      ParseSweepSpec(text, format, fs::path(path).parent_path().string());
  if (!spec.ok()) {
    return absl::Status(spec.status().code(),
                        absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

std::string DescribeParameters(const std::map<std::string, Value>& parameters) {
  std::vector<std::string> parts;
  for (const auto& [path, value] : parameters) {
    parts.push_back(absl::StrCat(path, "=", ValueJson(value)));
  }
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<SweepTrial> MakeSweepTrial(const SweepSpec& spec,
                                          const Config& parameters, int index,
                                          int config, int seed_offset) {
  SweepTrial trial;
  trial.index = index;
  trial.config = config;
  trial.seed_offset = seed_offset;
  trial.parameters = parameters;
  trial.spec = spec.base();
  const std::string label = absl::StrCat("trial ", trial.index, " (",
                                         DescribeParameters(parameters), ")");
  for (const auto& [path, value] : parameters) {
    if (absl::Status set = SetRunField(&trial.spec, path, value); !set.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": ", set.message()));
    }
  }
  trial.spec.set_seed(spec.base().seed() + static_cast<uint64_t>(seed_offset));
  trial.spec.set_name(absl::StrCat(spec.name(), "-", trial.index));
  if (absl::Status resolved = ResolveRunSpec(&trial.spec); !resolved.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, " is not a valid run: ", resolved.message()));
  }
  return trial;
}

absl::Status CheckConfiguration(const SweepSpec& spec,
                                const Config& parameters) {
  Problems p;
  for (const auto& [path, value] : parameters) {
    if (spec.parameters().find(path) == spec.parameters().end()) {
      p.Add(absl::StrCat("parameters.", path,
                         ": not one of the sweep's parameters"));
    }
  }
  const std::map<std::string, SweepParameter> sorted(spec.parameters().begin(),
                                                     spec.parameters().end());
  for (const auto& [path, param] : sorted) {
    const std::string at = absl::StrCat("parameters.", path);
    auto it = parameters.find(path);
    if (it == parameters.end()) {
      p.Add(absl::StrCat(at,
                         ": missing (every parameter of the sweep needs "
                         "a value)"));
      continue;
    }
    const Value& value = it->second;
    if (param.values_size() > 0) {
      bool found = false;
      for (const Value& allowed : param.values()) {
        found = found || ValueJson(allowed) == ValueJson(value);
      }
      if (!found) {
        p.Add(at, "not one of its values", ValueJson(value));
      }
      continue;
    }
    if (!value.has_number_value()) {
      p.Add(at, "must be a number", ValueJson(value));
      continue;
    }
    const double x = value.number_value();
    if (!(x >= param.min() && x <= param.max())) {
      p.Add(at,
            absl::StrCat("must be in [", param.min(), ", ", param.max(), "]"),
            x);
    } else if (param.distribution() == "int" && x != std::floor(x)) {
      p.Add(at, "must be an integer", x);
    }
  }
  return p.ToStatus();
}

absl::StatusOr<std::vector<SweepTrial>> ExpandSweep(const SweepSpec& spec) {
  std::vector<SweepTrial> trials;
  if (spec.method() == "external") return trials;  // AddSweepTrial's
  const std::vector<Config> configs =
      spec.method() == "grid" ? GridConfigs(spec) : RandomConfigs(spec);
  for (size_t c = 0; c < configs.size(); ++c) {
    for (int s = 0; s < spec.seeds_per_config(); ++s) {
      // A population's members each have their own seed.
      const int seed_offset = spec.method() == "pbt" ? static_cast<int>(c) : s;
      ASSIGN_OR_RETURN(
          SweepTrial trial,
          MakeSweepTrial(spec, configs[c], static_cast<int>(trials.size()),
                         static_cast<int>(c), seed_offset));
      trials.push_back(std::move(trial));
    }
  }
  return trials;
}

}  // namespace rl
