"""PettingZoo envs for the Gymnasium bridge (gym_bridge.py loads this file
as the module rl_parallel_rows; gym_bridge.cc compiles it in as
_PARALLEL_ROWS_PY): copies of a Parallel env, or of an AEC (turn-based)
env, whose agents are the rows of one vector env, as the plugin ABI's
agents are (rl_env_plugin.h)."""

import gymnasium as gym
import numpy as np


def is_aec(env):
    """Whether env follows PettingZoo's AEC (turn-based) API: agents take
    turns (agent_selection, set by reset), observe(agent) and last()."""
    return (callable(getattr(env, "last", None)) and
            callable(getattr(env, "observe", None)) and
            hasattr(env, "possible_agents"))


def is_parallel(env):
    """Whether env follows PettingZoo's Parallel API: possible_agents, and
    observation_space(agent) / action_space(agent) as methods."""
    return (hasattr(env, "possible_agents") and
            callable(getattr(env, "observation_space", None)) and
            callable(getattr(env, "action_space", None)) and
            not isinstance(env, gym.Env))


def agents_and_spaces(first, num_envs, kind):
    """(agents, observation space, action space) of a PettingZoo env's first
    copy (kind: "Parallel" or "AEC"): num_envs must be whole copies, and
    every agent must have the same spaces (one policy plays them all)."""
    names = [str(a) for a in first.possible_agents]
    if not names:
        raise ValueError(f"the PettingZoo {kind} env has no possible_agents")
    if num_envs % len(names) != 0:
        raise ValueError(
            f"num_envs {num_envs} is not a multiple of the PettingZoo env's "
            f"{len(names)} agents ({', '.join(names)}): one environment is "
            f"that many rows (env.agents_per_env: {len(names)})")
    agents = list(first.possible_agents)
    obs_space = first.observation_space(agents[0])
    act_space = first.action_space(agents[0])
    for agent in agents[1:]:
        if (first.observation_space(agent) != obs_space or
                first.action_space(agent) != act_space):
            raise ValueError(
                f"agent {agent} has spaces {first.observation_space(agent)} "
                f"/ {first.action_space(agent)}, agent {agents[0]} "
                f"{obs_space} / {act_space}: the service trains one policy "
                "for every agent, so all must have the same spaces")
    return agents, obs_space, act_space


def set_vector_fields(rows, first, names, num_envs, obs_space, act_space):
    """What the bridge reads of a vector env, on `rows` (ParallelRows or
    AecRows): agents, counts, spaces, metadata (never episodic_life)."""
    rows.agent_names = names
    rows.agents_per_env = len(names)
    rows.num_envs = num_envs
    rows.single_observation_space = obs_space
    rows.single_action_space = act_space
    rows.action_space = gym.vector.utils.batch_space(act_space, num_envs)
    rows.metadata = dict(getattr(first, "metadata", None) or {})
    rows.metadata.pop("episodic_life", None)


class ParallelRows:
    """num_envs / A copies of a PettingZoo Parallel env of A agents as a
    vector env of num_envs rows: agent k of copy c is row c * A + k (the
    plugin ABI's agents, rl_env_plugin.h), in possible_agents' order. Every
    agent has the same spaces. Same-step autoreset as the bridge's Gymnasium
    vector envs: a copy whose episode ends (any agent terminated or
    truncated, every agent gone, or max_steps) ends it for all its agents
    (those not terminated are truncated), leaves their last observations in
    info["final_obs"] and starts its next episode in the same step. An agent
    that leaves (terminated or truncated, or gone from env.agents) while the
    others play on is refused, unless the run allows agents to leave early
    (env.agents_leave, allow_leaving): its episode then ends there, its row
    is padding (alive 0: reward and flags 0, its last observation) until
    every agent of the copy has left, and the copy then resets as one."""

    def __init__(self, make_copy, num_envs, max_steps):
        first = make_copy()
        self._agents, obs_space, act_space = agents_and_spaces(
            first, num_envs, "Parallel")
        names = [str(a) for a in self._agents]
        set_vector_fields(self, first, names, num_envs, obs_space, act_space)
        self._copies = [first] + [make_copy()
                                  for _ in range(num_envs // len(names) - 1)]
        self._max_steps = max_steps
        self._steps = [0] * len(self._copies)
        self._obs = gym.vector.utils.create_empty_array(obs_space, num_envs)
        self._last = [{} for _ in self._copies]  # each copy's last observations
        self._leave = False
        self.alive = np.ones(num_envs, np.uint8)

    def allow_leaving(self):
        """The run allows agents to leave early (env.agents_leave)."""
        self._leave = True

    def _rows(self, per_copy):
        """Per-copy observation dicts as the batch of rows."""
        rows = [obs[a] for obs in per_copy for a in self._agents]
        return gym.vector.utils.concatenate(self.single_observation_space,
                                            rows, self._obs)

    def reset(self, seed=None, options=None):
        per_copy = []
        for c, env in enumerate(self._copies):
            obs, _ = env.reset(seed=None if seed is None else seed + c)
            per_copy.append(obs)
            self._last[c] = obs
            self._steps[c] = 0
        self.alive[:] = 1
        return self._rows(per_copy), {}

    def step(self, actions):
        a = self.agents_per_env
        n = self.num_envs
        rewards = np.zeros(n, np.float32)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        final_obs = np.empty(n, dtype=object)
        final_mask = np.zeros(n, bool)
        per_copy = []
        for c, env in enumerate(self._copies):
            live = set(env.agents)
            chosen = {agent: actions[c * a + k]
                      for k, agent in enumerate(self._agents) if agent in live}
            obs, rew, term, trunc, _ = env.step(chosen)
            self._steps[c] += 1
            flagged = {x for x in self._agents
                       if term.get(x, False) or trunc.get(x, False)}
            remaining = set(env.agents)
            if self._leave:
                # The agents whose rows are alive: every one must be flagged
                # when it goes (an env may keep a done agent in env.agents
                # a step longer).
                playing = {x for k, x in enumerate(self._agents)
                           if self.alive[c * a + k]}
                unflagged = sorted(str(x) for x in
                                   playing - remaining - flagged)
                if unflagged:
                    raise ValueError(
                        f"agent(s) {', '.join(unflagged)} left env.agents "
                        "without being terminated or truncated")
                ended = (playing <= flagged or not remaining or
                         (self._max_steps > 0 and
                          self._steps[c] >= self._max_steps))
            else:
                everyone = flagged == set(self._agents)
                if (not everyone and remaining and
                        (flagged or remaining != set(self._agents))):
                    gone = sorted(str(x) for x in
                                  flagged | (set(self._agents) - remaining))
                    raise ValueError(
                        f"agent(s) {', '.join(gone)} left the game while the "
                        "others play on: set env.agents_leave: true to train "
                        "agents that leave early (docs/multi_agent.md)")
                ended = (everyone or not remaining or
                         (self._max_steps > 0 and
                          self._steps[c] >= self._max_steps))
            # An agent the env gave no observation keeps its previous one
            # (to bootstrap from if it was cut, and as its padding).
            seen = {**self._last[c], **obs}
            for k, agent in enumerate(self._agents):
                i = c * a + k
                if not self.alive[i]:  # it left earlier: padding
                    continue
                rewards[i] = rew.get(agent, 0.0)
                terminated[i] = bool(term.get(agent, False))
                own = agent in flagged
                truncated[i] = (ended or own) and not terminated[i]
                if own and not ended:  # leaves; the others play on
                    self.alive[i] = 0
                    final_obs[i] = seen.get(agent)
                    final_mask[i] = final_obs[i] is not None
            if ended:
                for k, agent in enumerate(self._agents):
                    i = c * a + k
                    if not self.alive[i]:
                        continue  # its last observation went out already
                    final_obs[i] = seen.get(agent)
                    final_mask[i] = final_obs[i] is not None
                obs, _ = env.reset()
                self._steps[c] = 0
                self.alive[c * a:(c + 1) * a] = 1
                seen = obs
            per_copy.append(seen)
            self._last[c] = seen
        info = {}
        if final_mask.any():
            info = {"final_obs": final_obs, "_final_obs": final_mask}
        return self._rows(per_copy), rewards, terminated, truncated, info

    def close(self):
        for env in self._copies:
            env.close()


class AecRows:
    """num_envs / A copies of a PettingZoo AEC (turn-based) env of A agents
    as a vector env of num_envs rows (agent k of copy c is row c * A + k, in
    possible_agents' order), stepped through action masks: in each copy only
    the agent to move (agent_selection) acts. Its row's mask is the game's
    (the observation's "action_mask" where the observation space is a Dict
    of "observation" and "action_mask", as PettingZoo's classic games have
    it; else infos[agent]["action_mask"]; else every action). Every other
    row's mask allows action 0 only, and its action is not played: with one
    allowed action its log-probability is 0, so a waiting turn gives no
    policy gradient while its value is still learned. A step's reward for
    each row is env.rewards[agent] after the move (both players' at the
    winning move). A copy ends when any agent is terminated or truncated
    (or at max_steps moves): every agent's row ends at that step (those not
    terminated are truncated), its last observation goes to
    info["final_obs"], and the copy starts its next game at once. The
    action space must be Discrete; every agent has the same spaces."""

    def __init__(self, make_copy, num_envs, max_steps):
        first = make_copy()
        self._agents, raw, act_space = agents_and_spaces(first, num_envs, "AEC")
        names = [str(a) for a in self._agents]
        if (not isinstance(act_space, gym.spaces.Discrete) or
                int(act_space.start) != 0):
            raise ValueError(
                f"a turn-based (AEC) env's action space must be Discrete "
                f"starting at 0 (got {act_space}): the agents not to move are "
                "masked to action 0")
        self._mask_in_obs = (isinstance(raw, gym.spaces.Dict) and
                             "observation" in raw.spaces and
                             "action_mask" in raw.spaces)
        obs_space = raw["observation"] if self._mask_in_obs else raw
        set_vector_fields(self, first, names, num_envs, obs_space, act_space)
        self.action_mask_size = int(act_space.n)
        self.action_masks = np.zeros((num_envs, act_space.n), np.uint8)
        self._copies = [first] + [make_copy()
                                  for _ in range(num_envs // len(names) - 1)]
        self._max_steps = max_steps
        self._steps = [0] * len(self._copies)
        self._obs = gym.vector.utils.create_empty_array(obs_space, num_envs)

    def _observe(self, env, agent):
        obs = env.observe(agent)
        return obs["observation"] if self._mask_in_obs else obs

    def _mask_copy(self, c, env):
        """Masks of copy c's rows: the mover's from the game, 0 only for the
        others."""
        a = self.agents_per_env
        rows = self.action_masks[c * a:(c + 1) * a]
        rows[:] = 0
        rows[:, 0] = 1
        mover = env.agent_selection
        k = self._agents.index(mover)
        if self._mask_in_obs:
            mask = env.observe(mover)["action_mask"]
        else:
            mask = (env.infos.get(mover) or {}).get("action_mask")
        rows[k] = 1 if mask is None else np.asarray(mask, np.uint8)
        if not rows[k].any():
            raise ValueError(
                f"agent {mover} is to move and its action mask allows nothing")

    def _rows(self):
        rows = [self._observe(env, a) for env in self._copies
                for a in self._agents]
        return gym.vector.utils.concatenate(self.single_observation_space,
                                            rows, self._obs)

    def reset(self, seed=None, options=None):
        for c, env in enumerate(self._copies):
            env.reset(seed=None if seed is None else seed + c)
            self._steps[c] = 0
            self._mask_copy(c, env)
        return self._rows(), {}

    def step(self, actions):
        a = self.agents_per_env
        n = self.num_envs
        rewards = np.zeros(n, np.float32)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        final_obs = np.empty(n, dtype=object)
        final_mask = np.zeros(n, bool)
        for c, env in enumerate(self._copies):
            k = self._agents.index(env.agent_selection)
            action = int(actions[c * a + k])
            if not self.action_masks[c * a + k, action]:
                raise ValueError(
                    f"agent {self._agents[k]} of environment {c} played "
                    f"{action}, which its action mask forbids")
            env.step(action)
            self._steps[c] += 1
            term = {x: bool(env.terminations.get(x, False))
                    for x in self._agents}
            trunc = {x: bool(env.truncations.get(x, False))
                     for x in self._agents}
            ended = (any(term.values()) or any(trunc.values()) or
                     not env.agents or
                     (self._max_steps > 0 and self._steps[c] >= self._max_steps))
            for j, agent in enumerate(self._agents):
                i = c * a + j
                rewards[i] = float(env.rewards.get(agent, 0.0))
                terminated[i] = term[agent]
                truncated[i] = ended and not terminated[i]
            if ended:
                for j, agent in enumerate(self._agents):
                    final_obs[c * a + j] = self._observe(env, agent)
                    final_mask[c * a + j] = True
                env.reset()
                self._steps[c] = 0
            self._mask_copy(c, env)
        info = {}
        if final_mask.any():
            info = {"final_obs": final_obs, "_final_obs": final_mask}
        return self._rows(), rewards, terminated, truncated, info

    def close(self):
        for env in self._copies:
            env.close()
