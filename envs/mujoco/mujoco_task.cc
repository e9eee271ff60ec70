#include "envs/mujoco/mujoco_task.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>

#include "envs/mujoco/mujoco_assets.h"

namespace rl::mujoco_envs {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxActions = 64;
constexpr int kMaxObservation = 512;

// An embedded Gymnasium asset loaded through a virtual file system, or a
// file on disk.
ModelPtr LoadModel(const std::string& xml_file) {
  char error[1024] = "";
  mjModel* m = nullptr;
  if (xml_file.find('/') != std::string::npos) {
    m = mj_loadXML(xml_file.c_str(), nullptr, error, sizeof(error));
  } else {
    const MujocoAsset* asset = FindMujocoAsset(xml_file.c_str());
    if (asset == nullptr) {
      throw std::invalid_argument(
          "kwargs.xml_file: \"" + xml_file +
          "\" is neither a path (with a '/') nor one of Gymnasium's assets");
    }
    mjVFS vfs;
    mj_defaultVFS(&vfs);
    mj_addBufferVFS(&vfs, asset->name, asset->text,
                    static_cast<int>(std::strlen(asset->text)));
    m = mj_loadXML(asset->name, &vfs, error, sizeof(error));
    mj_deleteVFS(&vfs);
  }
  if (m == nullptr) {
    throw std::invalid_argument("kwargs.xml_file: cannot load " + xml_file +
                                ": " + error);
  }
  return ModelPtr(m);
}

}  // namespace

double MujocoTask::reward_low() const { return -kInf; }
double MujocoTask::reward_high() const { return kInf; }

MujocoTask::MujocoTask(const rlenv::Kwargs& kwargs,
                       const std::string& default_xml, int default_frame_skip) {
  read_keys_ = {"xml_file", "frame_skip"};
  model_ = LoadModel(kwargs.String("xml_file", default_xml));
  const int64_t skip = kwargs.Int("frame_skip", default_frame_skip);
  if (skip < 1 || skip > 1000) {
    throw std::invalid_argument(
        "kwargs.frame_skip: must be in [1, 1000], not " + std::to_string(skip));
  }
  frame_skip_ = static_cast<int>(skip);
}

void MujocoTask::Finish(const rlenv::Kwargs& kwargs) {
  for (const std::string& key : kwargs.Keys()) {
    if (std::find(read_keys_.begin(), read_keys_.end(), key) ==
        read_keys_.end()) {
      std::string known;
      for (const std::string& k : read_keys_)
        known += (known.empty() ? "" : ", ") + k;
      throw std::invalid_argument("kwargs." + key +
                                  ": not a kwarg of this environment (it "
                                  "takes " +
                                  known + ")");
    }
  }
  // The observation's size, from one observed state.
  mjData* d = mj_makeData(model_.get());
  std::vector<double> probe(1 << 16, std::nan(""));
  mj_forward(model_.get(), d);
  ObserveInto(d, probe.data());
  mj_deleteData(d);
  int n = 0;
  while (n < static_cast<int>(probe.size()) && !std::isnan(probe[n])) ++n;
  observation_size_ = n;
  // Step and Observe keep an action and an observation on the stack.
  if (model_->nu > kMaxActions || n > kMaxObservation) {
    throw std::invalid_argument(
        "kwargs.xml_file: the model has " + std::to_string(model_->nu) +
        " actuators and " + std::to_string(n) +
        " observation elements (at most " + std::to_string(kMaxActions) +
        " and " + std::to_string(kMaxObservation) + ")");
  }
}

double MujocoTask::Param(const rlenv::Kwargs& kwargs, const std::string& key,
                         double fallback) {
  read_keys_.push_back(key);
  const double v = kwargs.Number(key, fallback);
  if (!std::isfinite(v)) {
    throw std::invalid_argument("kwargs." + key + ": not finite");
  }
  return v;
}

bool MujocoTask::Flag(const rlenv::Kwargs& kwargs, const std::string& key,
                      bool fallback) {
  read_keys_.push_back(key);
  return kwargs.Bool(key, fallback);
}

std::pair<double, double> MujocoTask::Range(
    const rlenv::Kwargs& kwargs, const std::string& key,
    std::pair<double, double> fallback) {
  read_keys_.push_back(key);
  const std::vector<double> v =
      kwargs.Numbers(key, {fallback.first, fallback.second});
  if (v.size() != 2 || !(v[0] <= v[1])) {
    throw std::invalid_argument("kwargs." + key +
                                ": must be [low, high] with low <= high");
  }
  return {v[0], v[1]};
}

int MujocoTask::BodyId(const char* name) const {
  const int id = mj_name2id(model_.get(), mjOBJ_BODY, name);
  if (id < 0) {
    throw std::invalid_argument(std::string("the model has no body \"") + name +
                                "\" (kwargs.xml_file)");
  }
  return id;
}

double MujocoTask::Uniform(Rng& rng, double low, double high) {
  return std::uniform_real_distribution<double>(low, high)(rng);
}

double MujocoTask::Normal(Rng& rng) {
  return std::normal_distribution<double>(0.0, 1.0)(rng);
}

void MujocoTask::Reset(mjData* d, Rng& rng) const {
  mj_resetData(model_.get(), d);
  ResetModel(d, rng);
  mj_forward(model_.get(), d);
}

void MujocoTask::Simulate(mjData* d, const double* action) const {
  const mjModel* m = model_.get();
  for (int k = 0; k < m->nu; ++k) d->ctrl[k] = action[k];
  for (int k = 0; k < frame_skip_; ++k) mj_step(m, d);
  mj_rnePostConstraint(m, d);
}

StepOutcome MujocoTask::Step(mjData* d, const float* action) const {
  double a[kMaxActions];
  const int nu = model_->nu;
  for (int k = 0; k < nu; ++k) a[k] = action[k];
  return DoStep(d, a);
}

void MujocoTask::Observe(const mjData* d, float* obs) const {
  double o[kMaxObservation];
  ObserveInto(d, o);
  for (int k = 0; k < observation_size_; ++k) obs[k] = static_cast<float>(o[k]);
}

}  // namespace rl::mujoco_envs
