#include "envs/space_parts.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rl {
namespace {

// The most elements of one part (as env.observation_size's limit).
constexpr int64_t kMaxPartElements = int64_t{1} << 22;

const char* DtypeName(rl_dtype d) {
  switch (d) {
    case RL_DTYPE_FLOAT32:
      return "float32";
    case RL_DTYPE_UINT8:
      return "uint8";
    case RL_DTYPE_INT64:
      return "int64";
  }
  return "unknown dtype";
}

std::vector<int64_t> Shape(const rl_space& s) {
  std::vector<int64_t> shape;
  for (int i = 0; i < s.rank && i < RL_ENV_MAX_RANK; ++i) {
    shape.push_back(s.shape[i]);
  }
  return shape;
}

// The problem with one part's space, or "".
std::string PartProblem(const rl_space& s) {
  if (s.rank < 1 || s.rank > RL_ENV_MAX_RANK) {
    return absl::StrCat("its rank ", s.rank, " is outside [1, 8]");
  }
  // At most kMaxPartElements in all, counted without overflow.
  int64_t elements = 1;
  for (int i = 0; i < s.rank; ++i) {
    if (s.shape[i] < 1) return absl::StrCat("shape[", i, "] is ", s.shape[i]);
    if (s.shape[i] > kMaxPartElements / elements) {
      return absl::StrCat("more than ", kMaxPartElements, " elements");
    }
    elements *= s.shape[i];
  }
  switch (s.kind) {
    case RL_SPACE_BOX:
      if (s.dtype != RL_DTYPE_FLOAT32 && s.dtype != RL_DTYPE_UINT8) {
        return "a Box holds float32 or uint8";
      }
      return "";
    case RL_SPACE_DISCRETE:
      return s.rank == 1 ? "" : "a Discrete has rank 1 (shape [n])";
    case RL_SPACE_MULTI_DISCRETE:
      if (s.rank != 1) return "a MultiDiscrete has rank 1";
      if (s.nvec == nullptr) return "a MultiDiscrete without nvec";
      for (int64_t k = 0; k < s.shape[0]; ++k) {
        if (s.nvec[k] < 1 || s.nvec[k] > (1 << 20)) {
          return absl::StrCat("nvec[", k, "] is ", s.nvec[k],
                              " (outside [1, 2^20])");
        }
      }
      return "";
    case RL_SPACE_MULTI_BINARY:
      return "";
  }
  return absl::StrCat("unknown space kind ", static_cast<int>(s.kind));
}

}  // namespace

int64_t SpaceElements(const rl_space& s) {
  if (s.kind == RL_SPACE_DISCRETE) return 1;
  int64_t n = 1;
  for (int i = 0; i < s.rank && i < RL_ENV_MAX_RANK; ++i) n *= s.shape[i];
  return n;
}

int64_t FlatElements(const rl_space& s) {
  switch (s.kind) {
    case RL_SPACE_DISCRETE:
      return s.rank >= 1 ? s.shape[0] : 0;
    case RL_SPACE_MULTI_DISCRETE: {
      int64_t n = 0;
      for (int64_t k = 0; s.nvec != nullptr && k < SpaceElements(s); ++k) {
        n += s.nvec[k];
      }
      return n;
    }
    default:
      return SpaceElements(s);
  }
}

std::string DescribeSpace(const rl_space& s) {
  const std::vector<int64_t> shape = Shape(s);
  switch (s.kind) {
    case RL_SPACE_BOX:
      return absl::StrCat("Box(", DtypeName(s.dtype), ", [",
                          absl::StrJoin(shape, ", "), "])");
    case RL_SPACE_DISCRETE:
      return absl::StrCat("Discrete(", shape.empty() ? 0 : shape[0], ")");
    case RL_SPACE_MULTI_DISCRETE: {
      std::vector<int64_t> nvec;
      for (int64_t k = 0; s.nvec != nullptr && k < SpaceElements(s); ++k) {
        nvec.push_back(s.nvec[k]);
      }
      return absl::StrCat("MultiDiscrete([", absl::StrJoin(nvec, ", "), "])");
    }
    case RL_SPACE_MULTI_BINARY:
      return absl::StrCat("MultiBinary([", absl::StrJoin(shape, ", "), "])");
  }
  return absl::StrCat("unknown space kind ", static_cast<int>(s.kind));
}

std::string DescribeLayout(const std::vector<SpacePart>& parts) {
  std::vector<std::string> out;
  for (const SpacePart& p : parts) {
    out.push_back(absl::StrCat(p.name, " ", p.space, " at [", p.offset, ", ",
                               p.offset + p.size, ")"));
  }
  return absl::StrJoin(out, ", ");
}

absl::StatusOr<EnvSpaceParts> ReadSpaceParts(const rl_env_plugin* plugin,
                                             rl_env* env,
                                             const rl_env_info& info,
                                             const std::string& origin) {
  EnvSpaceParts out;
  if (plugin->space_parts == nullptr) return out;
  auto failed = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "environment plugin ", origin, ": its Dict/Tuple parts: ", why));
  };
  rl_env_parts parts{};
  char error[1024] = "";
  if (plugin->space_parts(env, &parts, error, sizeof(error)) != 0) {
    return failed(absl::StrCat("space_parts failed: ",
                               error[0] != '\0' ? error : "(no message)"));
  }
  // Both lists: each part checked and placed.
  auto read = [&](const char* which, int32_t count, const rl_space_part* list,
                  std::vector<SpacePart>* placed) -> absl::Status {
    if (count < 0 || count > 64 || (count > 0 && list == nullptr)) {
      return failed(
          absl::StrCat(count, " ", which, " parts (at most 64, and a list)"));
    }
    std::set<std::string> names;
    int64_t offset = 0;
    for (int32_t i = 0; i < count; ++i) {
      const rl_space_part& part = list[i];
      const std::string name = part.name != nullptr ? part.name : "";
      const std::string at =
          absl::StrCat(which, " part ", i, " (\"", name.substr(0, 64), "\")");
      if (name.empty() || name.size() > 64) {
        return failed(absl::StrCat(at, ": a name of 1 to 64 characters"));
      }
      if (!names.insert(name).second) {
        return failed(absl::StrCat(at, ": the name of an earlier part too"));
      }
      if (const std::string problem = PartProblem(part.space);
          !problem.empty()) {
        return failed(absl::StrCat(at, ": ", problem));
      }
      SpacePart p;
      p.name = name;
      p.space = DescribeSpace(part.space);
      p.offset = offset;
      p.bytes =
          part.space.kind == RL_SPACE_BOX && part.space.dtype == RL_DTYPE_UINT8;
      p.size = FlatElements(part.space);
      if (part.space.kind == RL_SPACE_BOX ||
          part.space.kind == RL_SPACE_MULTI_BINARY) {
        p.flat_shape = Shape(part.space);
      } else {
        p.flat_shape = {p.size};
      }
      offset += p.size;
      placed->push_back(std::move(p));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = read("observation", parts.num_observation_parts,
                            parts.observation_parts, &out.observation);
      !s.ok()) {
    return s;
  }
  if (!out.observation.empty()) {
    int64_t total = 0;
    bool bytes = true;
    for (const SpacePart& p : out.observation) {
      total += p.size;
      bytes &= p.bytes;
    }
    const rl_space& flat = info.observation;
    const rl_dtype dtype = bytes ? RL_DTYPE_UINT8 : RL_DTYPE_FLOAT32;
    if (flat.kind != RL_SPACE_BOX || flat.dtype != dtype ||
        SpaceElements(flat) != total) {
      return failed(absl::StrCat(
          "the observation parts (", DescribeLayout(out.observation),
          ") flatten to a Box of ", total, " ", DtypeName(dtype),
          " elements; it declares ", DescribeSpace(flat)));
    }
  }
  // Actions: entries of a MultiDiscrete, or elements of a Box.
  std::vector<SpacePart> action;
  if (absl::Status s =
          read("action", parts.num_action_parts, parts.action_parts, &action);
      !s.ok()) {
    return s;
  }
  if (!action.empty()) {
    std::vector<int64_t> nvec;
    std::vector<double> low, high;
    int boxes = 0;
    for (int32_t i = 0; i < parts.num_action_parts; ++i) {
      const rl_space& s = parts.action_parts[i].space;
      SpacePart& p = action[i];
      p.offset = s.kind == RL_SPACE_BOX ? static_cast<int64_t>(low.size())
                                        : static_cast<int64_t>(nvec.size());
      switch (s.kind) {
        case RL_SPACE_BOX:
          if (s.dtype != RL_DTYPE_FLOAT32) {
            return failed(absl::StrCat("action part \"", p.name,
                                       "\": a Box action holds float32"));
          }
          ++boxes;
          for (int64_t k = 0; k < SpaceElements(s); ++k) {
            low.push_back(s.low != nullptr ? s.low[k] : -INFINITY);
            high.push_back(s.high != nullptr ? s.high[k] : INFINITY);
          }
          break;
        case RL_SPACE_DISCRETE:
          nvec.push_back(s.shape[0]);
          break;
        case RL_SPACE_MULTI_DISCRETE:
          for (int64_t k = 0; k < s.shape[0]; ++k) nvec.push_back(s.nvec[k]);
          break;
        case RL_SPACE_MULTI_BINARY:
          for (int64_t k = 0; k < SpaceElements(s); ++k) nvec.push_back(2);
          break;
      }
      p.size = (s.kind == RL_SPACE_BOX ? static_cast<int64_t>(low.size())
                                       : static_cast<int64_t>(nvec.size())) -
               p.offset;
    }
    if (boxes > 0 && !nvec.empty()) {
      return failed(
          absl::StrCat("the action parts (", DescribeLayout(action),
                       ") mix Boxes with discrete parts: declare one kind"));
    }
    const rl_space& flat = info.action;
    bool same;
    if (boxes > 0) {
      same = flat.kind == RL_SPACE_BOX && flat.dtype == RL_DTYPE_FLOAT32 &&
             SpaceElements(flat) == static_cast<int64_t>(low.size());
      for (size_t k = 0; same && k < low.size(); ++k) {
        const double l = flat.low != nullptr ? flat.low[k] : -INFINITY;
        const double h = flat.high != nullptr ? flat.high[k] : INFINITY;
        same = l == low[k] && h == high[k];
      }
    } else {
      same = flat.kind == RL_SPACE_MULTI_DISCRETE && flat.rank == 1 &&
             flat.nvec != nullptr &&
             flat.shape[0] == static_cast<int64_t>(nvec.size()) &&
             std::equal(nvec.begin(), nvec.end(), flat.nvec);
    }
    if (!same) {
      return failed(absl::StrCat(
          "the action parts (", DescribeLayout(action), ") make ",
          boxes > 0 ? absl::StrCat("a float32 Box of ", low.size(),
                                   " elements and their bounds")
                    : absl::StrCat("MultiDiscrete([", absl::StrJoin(nvec, ", "),
                                   "])"),
          "; it declares ", DescribeSpace(flat)));
    }
    out.action = std::move(action);
  }
  return out;
}

absl::Status CheckObservationParts(const EnvSpaceParts& parts,
                                   const EnvSpec& spec,
                                   const std::string& origin) {
  if (spec.observation_parts_size() == 0) return absl::OkStatus();
  auto described = [](const ObservationPart& p) {
    return absl::StrCat(p.name(), " ",
                        p.dtype().empty() ? "float32" : p.dtype(), " [",
                        absl::StrJoin(p.shape(), ", "), "]");
  };
  std::vector<std::string> want, got;
  for (const ObservationPart& p : spec.observation_parts()) {
    want.push_back(described(p));
  }
  for (const SpacePart& p : parts.observation) {
    got.push_back(absl::StrCat(p.name, " ", p.bytes ? "uint8" : "float32", " [",
                               absl::StrJoin(p.flat_shape, ", "), "]"));
  }
  if (want == got) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "environment plugin ", origin,
      " declares spaces that disagree with the run's env spec: ",
      parts.observation.empty() ? "its observation is not a Dict or Tuple"
                                : absl::StrCat("its observation parts are (",
                                               absl::StrJoin(got, "; "), ")"),
      ", env.observation_parts are (", absl::StrJoin(want, "; "), ")"));
}

}  // namespace rl
