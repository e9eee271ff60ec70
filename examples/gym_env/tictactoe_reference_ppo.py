"""An independent PPO for tic-tac-toe in numpy (gradients by hand), to check
rl_local's self-play against.

The same game (tictactoe_aec.py), rows and settings as
examples/gym_env/tictactoe_aec.yaml and rl_local's defaults: 32 rows x 32
steps an update (in self-play two rows per game, X and O: 16 games; the
row not to move is masked to action 0, which is not played), 4 epochs of
4 minibatches, Adam (eps 1e-5) at 1e-3 annealed to 0, gamma 0.99, GAE
lambda 0.95, clip 0.2 (the value loss clipped too), entropy 0.05, value
0.5, gradient norm 0.5, a 128 x 128 tanh MLP for the policy and one for
the value, orthogonal initialisation, advantages normalised per minibatch
(unbiased std). Judged as
`rl_local eval` judges: 1,000 games against random moves with
deterministic actions, moving first every other game.

    python3 examples/gym_env/tictactoe_reference_ppo.py SEED STEPS [self|random]

`self`: self-play, one policy for both players (tictactoe_aec.yaml);
`random`: one agent against random moves (tictactoe_aec_random.yaml).
Prints the games won, drawn and lost (docs/multi_agent.md, "Turn-based
games").
"""

import sys

import numpy as np

from tictactoe_aec import winner

ROWS, STEPS = 32, 32
EPOCHS, MINIBATCHES = 4, 4
LR, GAMMA, LAMBDA, CLIP = 1e-3, 0.99, 0.95, 0.2
ENTROPY, VALUE, MAX_NORM = 0.05, 0.5, 0.5


class Mlp:
    """Linear layers with tanh between them; fwd keeps what bwd needs."""

    def __init__(self, rng, sizes, last_std):
        self.weights, self.biases = [], []
        for k in range(len(sizes) - 1):
            std = np.sqrt(2) if k < len(sizes) - 2 else last_std
            self.weights.append(orthogonal(rng, sizes[k], sizes[k + 1], std))
            self.biases.append(np.zeros(sizes[k + 1]))
        self.inputs = []

    def fwd(self, x):
        self.inputs = [x]
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = x @ w + b
            if k < len(self.weights) - 1:
                x = np.tanh(x)
            self.inputs.append(x)
        return x

    def bwd(self, grad):
        """Gradients of the weights, then of the biases, for d loss/d out."""
        n = len(self.weights)
        dw, db = [None] * n, [None] * n
        for k in reversed(range(n)):
            dw[k] = self.inputs[k].T @ grad
            db[k] = grad.sum(0)
            if k > 0:
                grad = (grad @ self.weights[k].T) * (1 - self.inputs[k] ** 2)
        return dw + db

    def params(self):
        return self.weights + self.biases


def orthogonal(rng, rows, cols, std):
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))
    return (q if rows >= cols else q.T)[:rows, :cols] * std


class Games:
    """ROWS rows of boards: X and O of each (self), or the agent alone
    against random moves, moving first every other game (random)."""

    def __init__(self, rng, mode):
        self.rng, self.mode = rng, mode
        self.agents = 2 if mode == "self" else 1
        self.rows = ROWS
        self.games = ROWS // self.agents
        self.boards = np.zeros((self.games, 9), np.int8)
        self.mover = np.zeros(self.games, np.int64)  # self: 0 X, 1 O to move
        self.mark = np.ones(self.games, np.int64)    # random: the agent's mark
        self.played = 0
        for g in range(self.games):
            self.reset(g)

    def random_move(self, g, mark):
        self.boards[g, self.rng.choice(np.flatnonzero(self.boards[g] == 0))] = mark

    def reset(self, g):
        self.boards[g] = 0
        self.mover[g] = 0
        if self.mode == "random":
            self.mark[g] = 1 if self.played % 2 == 0 else 2
            self.played += 1
            if self.mark[g] == 2:
                self.random_move(g, 1)

    def observe(self):
        """Observations (mine, theirs, to move) and masks of every row."""
        obs = np.zeros((self.rows, 19))
        masks = np.zeros((self.rows, 9), bool)
        for g in range(self.games):
            for k in range(self.agents):
                i = g * self.agents + k
                me = k + 1 if self.mode == "self" else self.mark[g]
                to_move = self.mover[g] == k if self.mode == "self" else True
                obs[i, :9] = self.boards[g] == me
                obs[i, 9:18] = self.boards[g] == 3 - me
                obs[i, 18] = to_move
                if to_move:
                    masks[i] = self.boards[g] == 0
                else:
                    masks[i, 0] = True
        return obs, masks

    def step(self, actions):
        rewards, done = np.zeros(self.rows), np.zeros(self.rows)
        for g in range(self.games):
            k = self.mover[g] if self.mode == "self" else 0
            mark = k + 1 if self.mode == "self" else self.mark[g]
            board = self.boards[g]
            board[actions[g * self.agents + k]] = mark
            won = winner(board)
            if not won and self.mode == "random" and (board == 0).any():
                self.random_move(g, 3 - mark)
                won = winner(board)
            if won or not (board == 0).any():
                if self.mode == "self" and won:
                    rewards[g * 2 + won - 1] = 1
                    rewards[g * 2 + 2 - won] = -1
                elif won:
                    rewards[g] = 1 if won == mark else -1
                done[g * self.agents:(g + 1) * self.agents] = 1
                self.reset(g)
            elif self.mode == "self":
                self.mover[g] = 1 - k
        return rewards, done


def log_probs(actor, obs, masks):
    logits = np.where(masks, actor.fwd(obs), -1e9)
    logits = logits - logits.max(1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    return logp, np.exp(logp)


def train(seed, total, mode):
    rng = np.random.default_rng(seed)
    actor = Mlp(rng, [19, 128, 128, 9], 0.01)
    critic = Mlp(rng, [19, 128, 128, 1], 1.0)
    params = actor.params() + critic.params()
    m1 = [np.zeros_like(p) for p in params]
    m2 = [np.zeros_like(p) for p in params]
    adam_steps = 0
    games = Games(rng, mode)
    n = games.rows
    obs, masks = games.observe()
    updates = total // (STEPS * n)
    for update in range(updates):
        lr = LR * (1 - update / updates)
        batch = {k: [] for k in ("obs", "masks", "actions", "logp", "values",
                                 "rewards", "done")}
        for _ in range(STEPS):
            logp, p = log_probs(actor, obs, masks)
            values = critic.fwd(obs)[:, 0]
            actions = np.array([rng.choice(9, p=row) for row in p])
            rewards, done = games.step(actions)
            for key, value in (("obs", obs), ("masks", masks), ("actions", actions),
                               ("logp", logp[np.arange(n), actions]),
                               ("values", values), ("rewards", rewards),
                               ("done", done)):
                batch[key].append(value)
            obs, masks = games.observe()
        # GAE, the episode's end cutting the bootstrap.
        next_value = critic.fwd(obs)[:, 0]
        advantages = np.zeros((STEPS, n))
        last = 0
        for t in reversed(range(STEPS)):
            following = next_value if t == STEPS - 1 else batch["values"][t + 1]
            live = 1 - batch["done"][t]
            delta = batch["rewards"][t] + GAMMA * following * live - batch["values"][t]
            last = delta + GAMMA * LAMBDA * live * last
            advantages[t] = last
        returns = (advantages + np.array(batch["values"])).reshape(-1)
        advantages = advantages.reshape(-1)
        flat = {k: np.concatenate(batch[k])
                for k in ("obs", "masks", "actions", "logp", "values")}
        rows = np.arange(STEPS * n)
        for _ in range(EPOCHS):
            rng.shuffle(rows)
            for mb in np.array_split(rows, MINIBATCHES):
                size = len(mb)
                mb_masks, mb_actions = flat["masks"][mb], flat["actions"][mb]
                logp, p = log_probs(actor, flat["obs"][mb], mb_masks)
                ratio = np.exp(logp[np.arange(size), mb_actions] - flat["logp"][mb])
                adv = advantages[mb]
                adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
                # max(-adv * ratio, -adv * clip(ratio)): the gradient flows
                # where the unclipped term is the larger.
                unclipped = -adv * ratio >= -adv * np.clip(ratio, 1 - CLIP, 1 + CLIP)
                d_logp = np.where(unclipped, -adv * ratio, 0) / size
                chosen = np.zeros_like(p)
                chosen[np.arange(size), mb_actions] = 1
                d_logits = d_logp[:, None] * (chosen - p)
                # Entropy H = -sum p log p; dH/dlogits = -p (log p + H).
                masked_logp = np.where(mb_masks, logp, 0)
                entropy = -(p * masked_logp).sum(1)
                d_logits += ENTROPY * p * (masked_logp + entropy[:, None]) / size
                d_logits = np.where(mb_masks, d_logits, 0)
                grads = actor.bwd(d_logits)
                values = critic.fwd(flat["obs"][mb])[:, 0]
                # VALUE * 0.5 * mean(max((v - R)^2, (clipped v - R)^2)),
                # clipped v = old v + clip(v - old v, -CLIP, CLIP).
                old, ret = flat["values"][mb], returns[mb]
                clipped = old + np.clip(values - old, -CLIP, CLIP)
                inside = np.abs(values - old) < CLIP
                d_values = np.where((values - ret) ** 2 >= (clipped - ret) ** 2,
                                    values - ret, (clipped - ret) * inside)
                grads += critic.bwd((VALUE * d_values / size)[:, None])
                norm = np.sqrt(sum((g ** 2).sum() for g in grads))
                scale = min(1.0, MAX_NORM / (norm + 1e-6))
                adam_steps += 1
                for k, (param, grad) in enumerate(zip(params, grads)):
                    grad = grad * scale
                    m1[k] = 0.9 * m1[k] + 0.1 * grad
                    m2[k] = 0.999 * m2[k] + 0.001 * grad * grad
                    param -= (lr * (m1[k] / (1 - 0.9 ** adam_steps)) /
                              (np.sqrt(m2[k] / (1 - 0.999 ** adam_steps)) + 1e-5))
    return actor


def judge(actor, games=1000):
    """Deterministic moves against random ones, first every other game."""
    rng = np.random.default_rng(1000003)
    outcomes = {"won": 0, "drew": 0, "lost": 0}
    for game in range(games):
        me = 1 if game % 2 == 0 else 2
        board = np.zeros(9, np.int8)
        turn = 1
        while True:
            if turn == me:
                obs = np.concatenate([board == me, board == 3 - me, [1]])[None]
                logits = np.where(board == 0, actor.fwd(obs.astype(float))[0], -1e9)
                board[int(logits.argmax())] = me
            else:
                board[rng.choice(np.flatnonzero(board == 0))] = 3 - me
            won = winner(board)
            if won or not (board == 0).any():
                outcomes["won" if won == me else "lost" if won else "drew"] += 1
                break
            turn = 3 - turn
    return outcomes


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    seed, total = int(sys.argv[1]), int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) == 4 else "self"
    if mode not in ("self", "random"):
        raise SystemExit(f"mode {mode!r}: self or random")
    outcomes = judge(train(seed, total, mode))
    print(f"reference PPO, {mode}, seed {seed}, {total} env steps: won "
          f"{outcomes['won'] / 10:.1f}%, drew {outcomes['drew'] / 10:.1f}%, "
          f"lost {outcomes['lost'] / 10:.1f}% of 1000 games against random moves")


if __name__ == "__main__":
    main()
