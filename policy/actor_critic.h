// The policy both sides of the wire agree on: an actor-critic of an
// encoder (MLP trunks, a CNN over images, or a CNN per image part of a Dict
// observation), an optional recurrent core (LSTM or GRU, its state carried
// per env), and an action head from the registry of policy/action_head.h
// (by default categorical for Discrete and MultiDiscrete, Bernoulli for
// MultiBinary, a diagonal Gaussian for Box), every discrete head honouring
// action masks; with optional running observation
// normalisation whose statistics are buffers of the module, so they travel
// with the weights and the checkpoints. ActorCriticConfig below says which.
//
// Errors: the forward passes (Act, Value, Evaluate) are LibTorch calls and
// throw c10::Error on tensors that do not fit, like any LibTorch operator,
// because a Status per call would cost the hot paths. Their callers check
// the inputs with CheckObservations / CheckActions and run them inside
// CatchTorchErrors (policy/torch_status.h), as the PPO updater does, or call
// ActChecked. Everything else here returns a Status.
#ifndef RL_POLICY_ACTOR_CRITIC_H_
#define RL_POLICY_ACTOR_CRITIC_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/action_head.h"
#include "policy/network_parts.h"
#include "policy/rollout.h"
#include "proto/common.pb.h"

namespace rl {

struct ActorCriticConfig {
  int observation_size = 0;
  int num_actions = 0;  // discrete; 0 if continuous
  int action_size = 0;  // continuous; 0 if discrete
  // MultiDiscrete: the choices of each part of an action (num_actions and
  // action_size 0): one categorical per part, the action [B, parts].
  std::vector<int64_t> action_nvec;
  // MultiBinary (EnvSpec.action_binary; action_nvec all 2): a Bernoulli
  // head, one logit per bit, instead of a categorical of 2 per part. The
  // actions and masks are the MultiDiscrete's.
  bool bernoulli = false;
  // The action head (policy.head): a name in the registry of
  // policy/action_head.h, or "" for the action space's default.
  std::string head;
  // The env's action bounds (Box): what the Gaussian heads clip or squash
  // their actions into.
  float action_low = 0.0f;
  float action_high = 0.0f;
  std::vector<int> hidden_sizes = {64, 64};
  bool shared_trunk = false;
  float initial_log_std = 0.0f;
  enum class Activation { kTanh, kRelu };
  Activation activation = Activation::kTanh;  // after each hidden layer
  bool normalize_observations = false;
  float observation_clip = 10.0f;
  // The env writes action masks (EnvSpec.action_mask; discrete only): Act
  // and Evaluate take them, and a masked action has probability 0.
  bool action_masks = false;
  // Observations are uint8 (EnvSpec.observation_dtype): they are taken as
  // such and scaled to float32 in [0, 1] (x / 255) inside the network,
  // before the normalisation, whose statistics are of the scaled values.
  bool byte_observations = false;
  // What reads the observations before the trunks (PolicyConfig.encoder):
  // the MLP trunks alone, or a CNN shared by both heads whose features the
  // hidden_sizes trunks (possibly none) then take.
  enum class Encoder { kMlp, kNatureCnn, kImpalaCnn };
  Encoder encoder = Encoder::kMlp;
  // CNN: the image as [channels, height, width], and whether an
  // observation lays it out as height, width, channels (HWC) instead.
  std::vector<int64_t> image_chw;
  bool channels_last = false;
  // A Dict or Tuple observation (EnvSpec.observation_parts): where each
  // part lies in the flat vector. uint8 parts of a float32 vector are
  // scaled to [0, 1] like byte observations (the obs_scale buffer). With a
  // CNN encoder, the encoder is per key: each image part (3 dimensions,
  // uint8, laid out as channels_last says) through a CNN of its own, the
  // other parts as they are, all concatenated for the trunks.
  struct ObservationPart {
    std::string name;
    int64_t offset = 0;
    int64_t size = 0;
    std::vector<int64_t> shape;
    bool bytes = false;
    bool image() const { return bytes && shape.size() == 3; }
  };
  std::vector<ObservationPart> observation_parts;
  // A recurrent core between the trunk and the heads (PolicyConfig.core):
  // the trunk (hidden_sizes; shared, whatever shared_trunk says) feeds an
  // LSTM or GRU cell of core_size units whose output both heads read (a
  // central critic's value head: the copy's outputs). Each env carries the
  // core's state from step to step.
  enum class Core { kNone, kLstm, kGru };
  Core core = Core::kNone;
  int core_size = 0;
  // A central critic (PolicyConfig.central_value): > 1, the agents of one
  // environment copy, whose rows are consecutive in every batch (agent k of
  // copy c is row c x agents + k). The value trunk reads CentralInput of the
  // encoder's output (with a core, the value head that of the core's
  // outputs); every batch the network is given holds whole copies.
  // 0: each row's value reads its own observation.
  int central_value_agents = 0;
};

// A central critic's input: rows [B, F] of whole copies of `agents` agents
// (row c x agents + k: agent k of copy c) -> [B, agents x F], row c x agents
// + k holding agent k's features, then agent k + 1's, ..., agent k - 1's
// (its own first, the others in turn). B must be a multiple of `agents`.
torch::Tensor CentralInput(const torch::Tensor& features, int64_t agents);

// The network a run's policy block asks for (and its PPO settings'
// observation normalisation), for the resolved environment `env` (its
// spaces' sizes). The spec is resolved (runspec/run_spec.h): its activation
// is tanh or relu.
ActorCriticConfig MakeActorCriticConfig(const EnvSpec& env,
                                        const PolicyConfig& policy,
                                        const PPOConfig& ppo);

// The network of a resolved run (MakeActorCriticConfig of its env, policy
// and PPO blocks): what every process of the run builds its policy from,
// the learner, the actor, rl_local and a checkpoint's reader alike.
ActorCriticConfig RunNetworkConfig(const RunSpec& spec);

// OK if `config` makes a network; else INVALID_ARGUMENT naming the field
// (CreateActorCritic's check).
absl::Status CheckActorCriticConfig(const ActorCriticConfig& config);

// The registered names (policy/network_parts.h) of an encoder and a core
// of the config: "mlp", "nature_cnn", "impala_cnn"; "none", "lstm", "gru".
std::string EncoderName(ActorCriticConfig::Encoder encoder);
std::string CoreName(ActorCriticConfig::Core core);

// Numbers of a recurrent state per env of `config`'s network: 2 x core_size
// for an LSTM (hidden and cell), core_size for a GRU, 0 without a core.
int64_t RecurrentStateSize(const ActorCriticConfig& config);

// The image of `part` (ActorCriticConfig::ObservationPart::image) as
// [channels, height, width], read as `channels_last` says.
std::vector<int64_t> PartImageChw(
    const ActorCriticConfig::ObservationPart& part, bool channels_last);

// Bytes of one observation's action mask (ActorCriticConfig::action_masks):
// num_actions, or the sum of action_nvec for MultiDiscrete.
int64_t ActionMaskWidth(const ActorCriticConfig& config);

// A random action mask [batch, ActionMaskWidth] for tests and self-checks:
// each action allowed with probability `allowed`, and the first action of
// every categorical (each MultiDiscrete part) always allowed.
torch::Tensor RandomActionMasks(const ActorCriticConfig& config, int64_t batch,
                                double allowed, at::Generator& generator);

// Output of acting on a batch of observations.
struct PolicyStep {
  torch::Tensor actions;    // [B] int64 or [B, A] float
  torch::Tensor log_probs;  // [B]
  torch::Tensor values;     // [B]
};

// Output of evaluating stored actions during an update.
struct PolicyEvaluation {
  torch::Tensor log_probs;  // [B]
  torch::Tensor entropy;    // [B]
  torch::Tensor values;     // [B]
};

class ActorCriticImpl : public torch::nn::Module {
 public:
  explicit ActorCriticImpl(const ActorCriticConfig& config);

  const ActorCriticConfig& config() const { return config_; }
  // One categorical (Discrete); MultiDiscrete is neither this nor
  // continuous.
  bool discrete() const { return config_.num_actions > 0; }
  bool multi_discrete() const { return !config_.action_nvec.empty(); }
  // MultiBinary actions (a multi_discrete() too).
  bool bernoulli() const { return config_.bernoulli; }
  // The action head (ActorCriticConfig::head, or the space's default).
  const ActionHead& head() const { return *head_; }
  // The CNN (null for an MLP encoder) and the recurrent core (null
  // without one) the network is composed of: the exports walk them.
  const ImageEncoder* image_encoder() const { return image_encoder_.get(); }
  const RecurrentCore* core() const { return core_.get(); }

  // Raw observations [B, obs] -> the network's input: uint8 ones scaled to
  // [0, 1] (ActorCriticConfig::byte_observations), then normalised with the
  // statistics as they are now (where normalisation is on).
  torch::Tensor NormalizeObservations(const torch::Tensor& observations) const;
  // uint8 observations scaled by 1 / 255 to float32, and so are the uint8
  // parts of a float32 Dict observation; others as they are.
  torch::Tensor FloatObservations(const torch::Tensor& observations) const;
  // Whether the encoder reads a Dict observation part by part (a CNN per
  // image part).
  bool per_key() const { return !part_encoders_.empty(); }

  // The recurrent state (ActorCriticConfig::core): B envs' states are a
  // float32 [B, state_size()] (an LSTM's hidden then cell state, a GRU's
  // hidden state), zeros where an episode starts. state_size() is 0 without
  // a core, and every `state` argument below is then ignored.
  bool recurrent() const {
    return config_.core != ActorCriticConfig::Core::kNone;
  }
  // Where the parameters and buffers live (module->to(device) moves them).
  torch::Device device() const { return obs_mean_.device(); }
  int64_t state_size() const {
    return core_ ? core_->StateSize(config_.core_size) : 0;
  }
  // Zeros [batch, state_size()] (undefined without a core).
  torch::Tensor InitialState(int64_t batch) const;

  // Samples actions (argmax / mean when `deterministic`) with `generator`.
  // `action_masks` ([B, n] uint8, 1 = allowed; undefined: none): a masked
  // action is never chosen. With a core, `state` ([B, state_size()]) is the
  // state before the step and is replaced by the state after it.
  // Inputs may live on any device (they move to the policy's); the outputs
  // are on the policy's device, the state stays on its own. The generator
  // draws on its own device: a CPU generator gives a policy on a GPU the
  // random stream it gives one on the CPU.
  PolicyStep Act(const torch::Tensor& observations,
                 c10::optional<at::Generator> generator,
                 bool deterministic = false,
                 const torch::Tensor& action_masks = torch::Tensor(),
                 torch::Tensor* state = nullptr);

  // Value estimates [B] of raw observations (with a core: in `state`).
  torch::Tensor Value(const torch::Tensor& observations,
                      const torch::Tensor& state = torch::Tensor());

  // Evaluate over whole env sequences, for a recurrent policy: T steps of
  // B envs, time-major ([T, B, obs], actions [T, B, ...], masks [T, B, n]
  // or undefined), from `initial_state` [B, state_size()] (the state before
  // step 0), the state zeroed after every step where `episode_ends` [T, B]
  // (uint8: terminated or truncated) is set. The result is flat, [T * B] in
  // time-major order: exactly what Act gave along the way (truncated BPTT
  // over the T steps). Without a core it is Evaluate on the flattened steps.
  // A central critic's B envs are whole copies, in agent order.
  PolicyEvaluation EvaluateSequence(const torch::Tensor& observations,
                                    const torch::Tensor& actions,
                                    const torch::Tensor& action_masks,
                                    const torch::Tensor& initial_state,
                                    const torch::Tensor& episode_ends);

  // Log-probabilities, entropy and values of `actions` taken at raw
  // `observations`, with gradients.
  // With `action_masks` as in Act: masked actions have probability 0 in
  // the log-probabilities and the entropy.
  PolicyEvaluation Evaluate(
      const torch::Tensor& observations, const torch::Tensor& actions,
      const torch::Tensor& action_masks = torch::Tensor());

  // OK if `action_masks` fit this policy for a batch of `batch`: undefined
  // without masks, uint8 [B, num_actions] (or [B, sum of action_nvec])
  // with them. Reads no data.
  absl::Status CheckActionMasks(const torch::Tensor& action_masks,
                                absl::string_view name, int64_t batch) const;

  // Folds a batch of raw observations [N, obs] into the running mean and
  // variance (parallel algorithm of Chan et al.). No-op if disabled.
  // INVALID_ARGUMENT (statistics unchanged) for a batch of another shape or
  // dtype, or with a non-finite value, which would poison every later
  // normalised observation.
  absl::Status UpdateObservationStatistics(const torch::Tensor& observations);

  // The same in two halves, for batches split over data-parallel ranks:
  // ObservationMoments gives a batch's [count, sum(obs), sum(obs^2)] as one
  // float64 vector of 1 + 2 * observation_size (checked like above; sums of
  // several ranks' moments are the moments of their union), and
  // MergeObservationMoments folds such moments into the statistics.
  absl::StatusOr<torch::Tensor> ObservationMoments(
      const torch::Tensor& observations);
  absl::Status MergeObservationMoments(const torch::Tensor& moments);

  // OK if `observations` is a float batch [B, observation_size]; else
  // INVALID_ARGUMENT naming `name` and both shapes. Reads no data.
  absl::Status CheckObservations(const torch::Tensor& observations,
                                 absl::string_view name) const;
  // OK if `actions` fit this policy for a batch of `batch`: int64 [B]
  // (discrete), int64 [B, parts] (MultiDiscrete) or float [B, action_size].
  // Reads no data.
  absl::Status CheckActions(const torch::Tensor& actions,
                            absl::string_view name, int64_t batch) const;

 private:
  // Chan et al.'s merge of a batch's float64 mean and (biased) variance.
  void FoldBatchStatistics(double batch_count, const torch::Tensor& batch_mean,
                           const torch::Tensor& batch_var);
  // Policy-head input and value-head input (equal with a shared trunk),
  // through the CNN first where there is one.
  std::pair<torch::Tensor, torch::Tensor> Trunks(const torch::Tensor& x);
  // The policy layer's output [B, head_->units()], what the head reads.
  torch::Tensor PolicyHead(const torch::Tensor& policy_features);
  // What the value head reads of the core's output [B, core_size]: it
  // itself, or for a central critic the CentralInput of the copy's.
  torch::Tensor CoreValueFeatures(const torch::Tensor& core);
  // One step of the core: trunk features [B, in] and the state before ->
  // the core's output [B, core_size]; `next_state` gets the state after.
  torch::Tensor CoreStep(const torch::Tensor& features,
                         const torch::Tensor& state, torch::Tensor* next_state);
  // Log-probabilities and entropy of `actions` under the heads' outputs,
  // and the values.
  PolicyEvaluation EvaluateHeads(const torch::Tensor& policy_features,
                                 const torch::Tensor& value_features,
                                 const torch::Tensor& actions,
                                 const torch::Tensor& action_masks);

  ActorCriticConfig config_;
  torch::nn::Sequential encoder_{nullptr};  // CNN encoders only
  // The per-key encoder: a CNN for each image part (null for the others),
  // one entry per observation part.
  std::vector<torch::nn::Sequential> part_encoders_;
  torch::Tensor obs_scale_;  // [obs] buffer: uint8 parts in a float vector
  torch::nn::Sequential policy_trunk_{nullptr};
  torch::nn::Sequential value_trunk_{nullptr};
  torch::nn::Linear policy_head_{nullptr};
  torch::nn::Linear value_head_{nullptr};
  std::shared_ptr<ImageEncoder> image_encoder_;  // CNN encoders only
  std::shared_ptr<RecurrentCore> core_;          // with a core only
  std::shared_ptr<ActionHead> head_;  // its parameters registered here
  torch::Tensor obs_mean_;            // [obs] buffer
  torch::Tensor obs_var_;             // [obs] buffer
  torch::Tensor obs_count_;           // [] float64 buffer
};
TORCH_MODULE(ActorCritic);

// A central critic's bootstrap values of truncated steps: [T, E] float on
// the policy's device, V at the final observation where `rollout` was
// truncated, 0 elsewhere. Each is valued with its copy's other agents at
// the same moment: their final observations where their episodes ended at
// that step too (truncated or terminated), else what they observed after
// it (observations[t + 1], or next_observations after the last step).
// `final_observations` [T, E, obs]: the final observation of every step
// that ended an episode (BatchedEnv's). `step_states` [T, E, state_size()]
// (a recurrent policy only; else undefined): the state each step left,
// before an episode's end zeroed it, from which each row is valued. On the
// host one forward over the copies with a truncated agent, on a device over
// every row.
torch::Tensor CentralTruncatedValues(ActorCriticImpl& policy,
                                     const Rollout& rollout,
                                     const torch::Tensor& final_observations,
                                     const torch::Tensor& step_states);

// A policy of `config`, with fresh (seeded by torch::manual_seed) weights.
// INVALID_ARGUMENT naming the field for sizes that make no network:
// observation_size < 1, not exactly one of num_actions / action_size
// positive, a hidden size < 1, observation_clip <= 0.
absl::StatusOr<ActorCritic> CreateActorCritic(const ActorCriticConfig& config);

// CreateActorCritic with fresh weights that are a function of `seed` alone:
// the global LibTorch generator is seeded and drawn from under one
// process-wide lock, so that policies made at once on several threads (two
// runs in one process) each get their own seed's weights.
absl::StatusOr<ActorCritic> CreateSeededActorCritic(
    const ActorCriticConfig& config, uint64_t seed);

// policy->Act as a Status: observations checked first (INVALID_ARGUMENT
// naming their shape), a LibTorch error INTERNAL.
// With a core, `state` ([B, state_size()] float32) is checked too and
// replaced by the state after the step.
absl::StatusOr<PolicyStep> ActChecked(
    ActorCritic& policy, const torch::Tensor& observations,
    c10::optional<at::Generator> generator, bool deterministic = false,
    const torch::Tensor& action_masks = torch::Tensor(),
    torch::Tensor* state = nullptr);

// The name of the first parameter of `policy` holding a NaN or an inf ("the
// observation statistics" where only its buffers do), or "" when every
// weight and statistic is finite (one reduction and one sync when they
// are). INTERNAL for a LibTorch error.
absl::StatusOr<std::string> FirstNonFiniteWeight(ActorCritic& policy);

// Copies `from`'s parameters and buffers into `to` (a network of the same
// config, on any device): the acting copy of a policy trained elsewhere.
absl::Status CopyPolicyWeights(ActorCritic& from, ActorCritic& to);

}  // namespace rl

#endif  // RL_POLICY_ACTOR_CRITIC_H_
