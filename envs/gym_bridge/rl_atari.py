"""Atari the CleanRL way, as Gymnasium ids for the bridge: "rl_atari:<Game>-v5"
(e.g. rl_atari:Breakout-v5, rl_atari:Pong-v5; every ROM ale-py ships) is
ale-py's ALE/<Game>-v5 preprocessed as CleanRL's ppo_atari.py and EnvPool's
Atari do it:

  - no-op reset (up to noop_max random no-ops), frame skip 4 with the last
    two frames max-pooled, 84x84 grayscale (Gymnasium's AtariPreprocessing,
    OpenCV's area resize), sticky actions off;
  - a lost life ends the training episode (terminated) and the game goes on
    (episodic_life); FIRE pressed after each reset where the game has it;
  - rewards clipped to their sign (reward_clip);
  - 4 stacked frames: observations uint8 [4, 84, 84], channels first;
  - a game lasts at most 108,000 frames (27,000 steps), ALE's own limit.

With episodic_life the env's metadata says so, and the bridge reports the
true games (raw rewards over every life, Gymnasium's
RecordEpisodeStatistics under the life wrapper) as the run's episodes; the
run file declares env.episodic_life: true. The gym_bridge compiles this file
in and loads it (as the module rl_atari) when a run names it."""

import functools

import gymnasium as gym
import numpy as np


class EpisodicLife(gym.Wrapper):
    """A lost life is the end of a training episode; the next reset goes on
    with the same game (one no-op step) until its last life is lost."""

    def __init__(self, env):
        super().__init__(env)
        self.metadata = {**env.metadata, "episodic_life": True}
        self._lives = 0
        self._game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = bool(terminated or truncated)
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self._game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op ended the game
                obs, info = self.env.reset(**kwargs)
        self._game_over = False
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Presses FIRE (then UP, as CleanRL's FireResetEnv) after each reset,
    for games that wait for it to start."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


def _sign(reward):
    return float(np.sign(reward))


def make(ale_id, noop_max=30, frame_skip=4, screen_size=84, stack_num=4,
         episodic_life=True, reward_clip=True, fire_reset=True,
         repeat_action_probability=0.0, max_num_frames_per_episode=108000,
         **ale_kwargs):
    """ale_id (e.g. "ALE/Breakout-v5") with CleanRL's preprocessing; other
    keyword arguments reach ale-py's env (full_action_space, mode, ...)."""
    import ale_py  # noqa: F401 (registers the ALE ids, in workers too)

    # ale-py's env copies its screen out at every frame; AtariPreprocessing
    # reads ALE's grey screen itself. A grey copy costs a third of an RGB
    # one (a fifth of the step).
    ale_kwargs.setdefault("obs_type", "grayscale")
    env = gym.make(ale_id, frameskip=1,
                   repeat_action_probability=repeat_action_probability,
                   max_num_frames_per_episode=max_num_frames_per_episode,
                   **ale_kwargs)
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=noop_max, frame_skip=frame_skip,
        screen_size=screen_size, terminal_on_life_loss=False,
        grayscale_obs=True, scale_obs=False)
    env = gym.wrappers.RecordEpisodeStatistics(env)  # the true games
    if episodic_life:
        env = EpisodicLife(env)
    if fire_reset and "FIRE" in env.unwrapped.get_action_meanings():
        env = FireReset(env)
    if reward_clip:
        env = gym.wrappers.TransformReward(env, _sign)
    return gym.wrappers.FrameStackObservation(env, stack_num)


def _register():
    import ale_py  # noqa: F401

    for ale_id in list(gym.registry):
        if ale_id.startswith("ALE/") and ale_id.endswith("-v5") and \
                "-ram-" not in ale_id:
            name = ale_id[len("ALE/"):]
            if name not in gym.registry:
                gym.register(id=name,
                             entry_point=functools.partial(make, ale_id))


_register()
