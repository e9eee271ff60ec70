"""Tic-tac-toe as a PettingZoo AEC (turn-based) env for the Gymnasium
bridge's turn-based path (docs/multi_agent.md): the players take turns,
each move masked to the empty cells. PettingZoo's own tictactoe_v3 needs
pygame; this one needs only numpy and pettingzoo.

Each player observes the board from its side: 19 floats, its own marks then
the opponent's (row-major), then 1 if it is to move (the rows of the
player who waits are stepped too, and their value differs), and the empty
cells as its action mask
(a Dict of "observation" and "action_mask", as PettingZoo's classic games
have it). Actions: Discrete(9), the cell. At the end +1 a win, -1 a loss,
0 a draw, for each player.

kwargs: opponent "self" (default: two agents, player_0 moves first, both
rows of the batch trained by one policy) or "random" (one agent against
uniformly random moves, moving first or second by turns: the judge of a
self-play run, `learning_test --judge`, and `rl_local eval`).

    env:
      id: tictactoe_aec:env
      plugin: gymnasium
      kwargs: {opponent: self}
      agents_per_env: 2
      observation_size: 19
      num_discrete_actions: 9
      action_mask: true
"""

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

_LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8),
          (0, 4, 8), (2, 4, 6)]


def winner(board):
    """1 or 2 for the player with three in a line, 0 for none."""
    for a, b, c in _LINES:
        if board[a] != 0 and board[a] == board[b] == board[c]:
            return int(board[a])
    return 0


class TicTacToe(AECEnv):
    metadata = {"name": "tictactoe_aec_v0", "render_modes": [],
                "is_parallelizable": False}

    def __init__(self, opponent="self"):
        super().__init__()
        if opponent not in ("self", "random"):
            raise ValueError(
                f"kwargs.opponent: 'self' or 'random' (got {opponent!r})")
        self._opponent = opponent
        self.possible_agents = (["player_0", "player_1"] if opponent == "self"
                                else ["player_0"])
        self._obs_space = spaces.Dict({
            "observation": spaces.Box(0, 1, (19,), np.float32),
            "action_mask": spaces.Box(0, 1, (9,), np.int8),
        })
        self._act_space = spaces.Discrete(9)
        self._rng = np.random.default_rng()
        self._games = 0

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def observe(self, agent):
        me = self._marks[agent]
        other = 3 - me
        to_move = agent == self.agent_selection and not self.terminations[agent]
        obs = np.concatenate([(self._board == me), (self._board == other),
                              [to_move]])
        return {"observation": obs.astype(np.float32),
                "action_mask": (self._board == 0).astype(np.int8)}

    def reset(self, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self._board = np.zeros(9, np.int8)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        if self._opponent == "self":
            self._marks = {"player_0": 1, "player_1": 2}
        else:
            # Against random moves the agent moves first every other game.
            first = self._games % 2 == 0
            self._marks = {"player_0": 1 if first else 2}
            self._games += 1
            if not first:
                self._random_move(1)
        self.agent_selection = self.agents[0]

    def _random_move(self, mark):
        empty = np.flatnonzero(self._board == 0)
        self._board[self._rng.choice(empty)] = mark

    def _end(self, won_by):
        for agent in self.agents:
            self.terminations[agent] = True
            if won_by:
                self.rewards[agent] = 1.0 if self._marks[agent] == won_by else -1.0

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self.rewards = {a: 0.0 for a in self.agents}
        if self._board[action] != 0:
            raise ValueError(f"{agent} played cell {action}, which is taken")
        me = self._marks[agent]
        self._board[action] = me
        won = winner(self._board)
        if not won and self._opponent == "random" and (self._board == 0).any():
            self._random_move(3 - me)
            won = winner(self._board)
        if won or not (self._board == 0).any():
            self._end(won)
        elif self._opponent == "self":
            self.agent_selection = ("player_1" if agent == "player_0"
                                    else "player_0")
        self._accumulate_rewards()


def env(opponent="self"):
    return TicTacToe(opponent)
