"""Ratings of a league's versions from the matches a run recorded
(<run_dir>/league/matches.csv, written by a run with a `league:` block:
docs/multi_agent.md#a-league-of-frozen-opponents).

Each version is one player. A match is the trained policy, while it was
becoming version L, against frozen version O; its result is the sign of the
trained seat's return (a win, a draw, a loss). Matches are rated in the
order they were played with OpenSkill's Bradley-Terry model (a maintained
Elo/TrueSkill-like rating). A version's rating therefore says how the
policy fared while it became that version and, after it froze, how later
versions fared against it. A negative version is a fixed member of the
league (league.members[k] is version -(k + 1)), shown as m1, m2, ..."""

import csv
import dataclasses
import os

COLUMNS = ("env_steps", "learner_version", "opponent_version", "learner_return")


@dataclasses.dataclass
class VersionRating:
    version: int
    mu: float
    sigma: float
    games: int = 0      # as the trained policy and as a frozen opponent
    won: int = 0        # as the trained policy
    drew: int = 0
    lost: int = 0
    first_step: int = -1  # env steps of its first game as the trained policy

    @property
    def ordinal(self):
        """The conservative rating, mu - 3 sigma."""
        return self.mu - 3 * self.sigma


def matches_path(run_dir):
    """The matches file of a run directory (or the file itself)."""
    if os.path.isdir(run_dir):
        return os.path.join(run_dir, "league", "matches.csv")
    return run_dir


def read_matches(path):
    """The matches of `path` as (env_steps, learner_version, opponent_version,
    learner_return) tuples; ValueError naming the line for a malformed one."""
    try:
        f = open(path, newline="")
    except OSError as e:
        raise ValueError(f"{path}: cannot read the league's matches ({e.strerror}); "
                         "a run writes them when it has a league block and a run directory")
    with f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None or tuple(header) != COLUMNS:
            raise ValueError(f"{path}:1: expected the header {','.join(COLUMNS)}, "
                             f"got {','.join(header or [])!r}")
        out = []
        for line, row in enumerate(rows, start=2):
            if len(row) != len(COLUMNS):
                raise ValueError(f"{path}:{line}: expected {len(COLUMNS)} fields, got {len(row)}")
            try:
                out.append((int(row[0]), int(row[1]), int(row[2]), float(row[3])))
            except ValueError:
                raise ValueError(f"{path}:{line}: not a match: {','.join(row)!r}")
        return out


def label(version):
    """v3 for the pool's version 3, m1 for the league's first member (-1)."""
    return f"v{version}" if version >= 0 else f"m{-version}"


def rate(matches):
    """VersionRatings of every version in `matches`, by version."""
    from openskill.models import BradleyTerryFull
    model = BradleyTerryFull()
    players, stats = {}, {}

    def player(version):
        if version not in players:
            players[version] = model.rating(name=label(version))
            stats[version] = VersionRating(version, 0.0, 0.0)
        return players[version]

    for steps, learner, opponent, result in matches:
        a, b = player(learner), player(opponent)
        if learner == opponent:
            continue  # a version against itself says nothing of either
        ranks = [0, 1] if result > 0 else [1, 0] if result < 0 else [0, 0]
        [[a], [b]] = model.rate([[a], [b]], ranks=ranks)
        players[learner], players[opponent] = a, b
        s = stats[learner]
        if s.first_step < 0:
            s.first_step = steps
        s.games += 1
        stats[opponent].games += 1
        if result > 0:
            s.won += 1
        elif result < 0:
            s.lost += 1
        else:
            s.drew += 1
    out = []
    for version in sorted(players):
        s = stats[version]
        s.mu, s.sigma = players[version].mu, players[version].sigma
        out.append(s)
    return out


def format_ratings(ratings, every=1):
    """A table of `ratings`: every member, then every `every`-th version
    (the first and the last always)."""
    lines = ["version  first at steps   rating (mu ± sigma)   games   as trained: won drew lost"]
    members = [r for r in ratings if r.version < 0]
    versions = [r for r in ratings if r.version >= 0]
    shown = members + [r for i, r in enumerate(versions)
                       if i % every == 0 or i == len(versions) - 1]
    for r in shown:
        played = r.won + r.drew + r.lost
        record = (f"{100 * r.won / played:5.1f}% {100 * r.drew / played:5.1f}% "
                  f"{100 * r.lost / played:5.1f}%" if played else "        -")
        first = str(r.first_step) if r.first_step >= 0 else "-"
        lines.append(f"{label(r.version):<8s} {first:>14}   {r.mu:7.2f} ± {r.sigma:5.2f}    "
                     f"{r.games:6d}   {record}")
    return "\n".join(lines)
