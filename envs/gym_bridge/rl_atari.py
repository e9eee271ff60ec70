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
in and loads it (as the module rl_atari) when a run names it.

CleanRLAtari does all of it in one env driving ALE directly: the same
frames, rewards, flags and games, step for step, as Gymnasium's wrappers
(make_wrapped: AtariPreprocessing, RecordEpisodeStatistics, EpisodicLife,
FireReset, TransformReward, FrameStackObservation; rl_atari_test checks
it), without their layers of Python per step (bench/atari_env_bench)."""

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


class CleanRLAtari(gym.Env):
    """ale_id (e.g. "ALE/Breakout-v5") preprocessed as make_wrapped does it,
    in one layer; other keyword arguments reach ale-py's env
    (full_action_space, mode, ...)."""

    def __init__(self, ale_id, noop_max=30, frame_skip=4, screen_size=84,
                 stack_num=4, episodic_life=True, reward_clip=True,
                 fire_reset=True, repeat_action_probability=0.0,
                 max_num_frames_per_episode=108000, **ale_kwargs):
        import ale_py  # noqa: F401 (registers the ALE ids, in workers too)

        if frame_skip < 1 or noop_max < 0 or stack_num < 1 or screen_size < 1:
            raise ValueError("frame_skip, stack_num and screen_size must be "
                             ">= 1 and noop_max >= 0")
        ale_kwargs.setdefault("obs_type", "grayscale")
        self._game = gym.make(
            ale_id, frameskip=1,
            repeat_action_probability=repeat_action_probability,
            max_num_frames_per_episode=max_num_frames_per_episode,
            **ale_kwargs).unwrapped
        self.ale = self._game.ale
        self._actions = self._game._action_set
        assert self._game.get_action_meanings()[0] == "NOOP"
        self.action_space = self._game.action_space
        self.observation_space = gym.spaces.Box(
            0, 255, (stack_num, screen_size, screen_size), np.uint8)
        self.metadata = {**self._game.metadata,
                         "episodic_life": bool(episodic_life)}
        self._noop_max, self._skip = noop_max, frame_skip
        self._size = (screen_size, screen_size)
        self._episodic_life, self._clip = episodic_life, reward_clip
        self._fire = (fire_reset and
                      "FIRE" in self._game.get_action_meanings())
        height, width = self.ale.getScreenDims()
        self._screens = [np.zeros((height, width), np.uint8),
                         np.zeros((height, width), np.uint8)]
        self._stack = np.zeros(self.observation_space.shape, np.uint8)
        self._lives = 0
        self._game_over = True
        self._return, self._length = 0.0, 0

    # AtariPreprocessing: frame_skip frames of one action, the last two
    # max-pooled and resized.
    def _frames(self, action):
        ale, code = self.ale, self._actions[action]
        total, terminated, truncated = 0.0, False, False
        for t in range(self._skip):
            total += ale.act(code, 1.0)
            terminated = ale.game_over(with_truncation=False)
            truncated = ale.game_truncated()
            if terminated or truncated:
                break
            if t == self._skip - 2:
                ale.getScreenGrayscale(self._screens[1])
            elif t == self._skip - 1:
                ale.getScreenGrayscale(self._screens[0])
        return total, terminated, truncated

    def _frame(self):
        import cv2

        if self._skip > 1:
            np.maximum(self._screens[0], self._screens[1], out=self._screens[0])
        return cv2.resize(self._screens[0], self._size,
                          interpolation=cv2.INTER_AREA)

    # AtariPreprocessing.reset (no-op starts) and the statistics'.
    def _new_game(self, seed):
        self._game.reset(seed=seed)
        noops = (self._game.np_random.integers(1, self._noop_max + 1)
                 if self._noop_max > 0 else 0)
        noop = self._actions[0]
        for _ in range(noops):
            self.ale.act(noop, 1.0)
            if (self.ale.game_over(with_truncation=False) or
                    self.ale.game_truncated()):
                self._game.reset(seed=seed)
        self.ale.getScreenGrayscale(self._screens[0])
        self._screens[1].fill(0)
        self._return, self._length = 0.0, 0
        return self._frame()

    # RecordEpisodeStatistics and EpisodicLife over the frames.
    def _life_step(self, action):
        reward, terminated, truncated = self._frames(action)
        frame = self._frame()
        self._return += reward
        self._length += 1
        info = {}
        if terminated or truncated:
            info["episode"] = {"r": self._return, "l": self._length}
        self._game_over = terminated or truncated
        if self._episodic_life:
            lives = self.ale.lives()
            if 0 < lives < self._lives:
                terminated = True
            self._lives = lives
        return frame, reward, terminated, truncated, info

    def _life_reset(self, seed):
        if self._game_over or not self._episodic_life:
            frame = self._new_game(seed)
        else:
            frame, _, terminated, truncated, _ = self._life_step(0)
            if terminated or truncated:
                frame = self._new_game(seed)
        self._game_over = False
        self._lives = self.ale.lives()
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        frame = self._life_reset(seed)
        if self._fire:  # FireReset
            for action in (1, 2):
                frame, _, terminated, truncated, _ = self._life_step(action)
                if terminated or truncated:
                    frame = self._life_reset(seed)
        self._stack[:] = frame
        return self._stack.copy(), {}

    def step(self, action):
        frame, reward, terminated, truncated, info = self._life_step(action)
        if self._clip:
            reward = float(np.sign(reward))
        self._stack[:-1] = self._stack[1:]
        self._stack[-1] = frame
        return self._stack.copy(), reward, terminated, truncated, info

    def close(self):
        self._game.close()


def make(ale_id, **kwargs):
    """ale_id with CleanRL's preprocessing (CleanRLAtari)."""
    return CleanRLAtari(ale_id, **kwargs)


def make_wrapped(ale_id, noop_max=30, frame_skip=4, screen_size=84,
                 stack_num=4, episodic_life=True, reward_clip=True,
                 fire_reset=True, repeat_action_probability=0.0,
                 max_num_frames_per_episode=108000, **ale_kwargs):
    """The same preprocessing from Gymnasium's own wrappers: the reference
    CleanRLAtari is tested against."""
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
