"""The entries of the graph's state (nodes.state), as types.

Every entry is a TypedDict, a plain dict at runtime: the checkpoints hold the same JSON as before, and
older ones stay readable. The agents' answers the prompts show again (a plan's subtask, a sub-action, a
decomposition, a critique, the last and previous attempt) are typed in prompts.facts, below the nodes,
and re-exported here; the rest are the nodes' own records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from typing_extensions import NotRequired, TypedDict  # pydantic (LangGraph's schemas) needs it before 3.12

from prompts.facts import (
    AttemptResult,
    CritiqueEntry,
    DecompositionEntry,
    FailedEntry,
    Kind,
    LastAttempt,
    PreviousAttempt,
    SubActionEntry,
    SubtaskEntry,
)

__all__ = [
    "AttemptResult", "CodeVersion", "CritiqueEntry", "CritiqueLog", "DecompositionEntry", "Event", "FailedEntry",
    "HeadTest", "Kind", "LastAttempt", "MeasuredResult", "PreviousAttempt", "RLConfigEntry", "SkillRecord",
    "StartStateEntry", "SubActionEntry", "SubtaskEntry", "coded", "learned",
]


def coded(sub_actions: Iterable[SubActionEntry]) -> list[SubActionEntry]:
    """The coded sub-actions, in order."""
    return [a for a in sub_actions if a["kind"] == "code"]


def learned(sub_actions: Iterable[SubActionEntry]) -> list[SubActionEntry]:
    """The learned (rl) sub-actions, in order."""
    return [a for a in sub_actions if a["kind"] == "rl"]


class MeasuredResult(TypedDict, total=False):
    """One measured attempt: an entry of `results`, a subtask's `best`, the attempt's `last_result`
    (nodes.attempt.results summarises the round, nodes.attempt.rounds adds where it belongs and its artefacts;
    nodes.critic writes a failed one when nothing was measured)."""

    # -- every result --
    kind: Kind                         # code tests or a training
    success_rate: float                # from a fresh world (chain_training: from where the chain reached it)
    rate_source: str                   # code_tests | training | chain_training | validation | none
    steps: int                         # env steps the round spent
    errors: list[str]                  # the first errors, as text
    episodes: int                      # code: test episodes judged (0 for a training or nothing measured)
    ok: bool                           # rl (and a failed one): the training ran
    # -- where it belongs (nodes.attempt.rounds.record_round, nodes.critic) --
    subtask: str
    sub_action: str                    # the judged sub-action
    outer_iter: int
    inner_iter: int
    # -- code tests (nodes.attempt.results.summarise_code_runs) --
    successes: int
    prerequisites: list[str]           # achievements the replayed prefix must unlock first
    replayed: list[str]                # the earlier skills the tests played first, in plan order
    started: int                       # runs that reached the judged sub-action
    started_successes: int
    success_given_start: float | None  # the rate over those runs (None: none reached it)
    outcomes: dict[str, int]           # ok | no_action | no_success | a failure kind -> runs
    harness_failures: int              # runs the harness failed (not counted)
    seeds: list[int | None]
    per_seed: list[dict[str, Any]]     # seed, success, steps, failure, ended, death_cause, inventory_after
    head_test: bool                    # a building block of a policy's head, tested before training (never kept)
    # the same seeds with the chain's helpers before this subtask's rewrite (nodes.attempt.rounds.record_round):
    # a result of its own, with `ranks_above` and `helpers` (name -> whose version it played)
    helpers_before: dict[str, Any]
    # the chain's helpers a round played in place of this subtask's rewrites, which the budget left no room to
    # compare (nodes.fast._write_code): name -> whose version it played; `sources` hold no rewrite of them
    helpers: dict[str, str]
    rewrite_not_played: bool           # with `helpers`: the round played them alone (else they ranked above)
    # -- a training (nodes.attempt.results.summarise_training) --
    curve_start: float | None          # first and last point of the learning curve
    curve_end: float | None
    episode_outcomes: Any              # how episodes ended (the training's outcome summary)
    stopped_early: str                 # why the training stopped before its budget (PPOSettings.stop_below)
    coded_action_counts: dict[str, Any]
    coded_action_failures: dict[str, Any]
    policy_path: str | None
    run_dir: str | None
    wall_time_s: float | None
    # -- artefacts, so the skill can be rebuilt (nodes.attempt.rounds._artefacts) --
    sources: list[str]                 # the coded sub-actions written for the subtask
    entry: str | None                  # code: the action the test called
    rl_config: dict[str, Any]          # rl: the configuration trained


class CodeVersion(TypedDict):
    """An entry of `code_versions`: one coded sub-action as the fast agent wrote it."""

    subtask: str
    sub_action: str
    version: int                       # counts the subtask's versions from 1
    source: str
    plan: NotRequired[dict[str, Any]]  # what the slow agent asked of it (nodes.attempt.rounds.plan_of)
    outer_iter: NotRequired[int]


class RLConfigEntry(TypedDict):
    """An entry of `rl_configs`: one PPO configuration sent to configure_rl."""

    subtask: str
    sub_action: str
    version: int
    config: dict[str, Any]             # the RLConfig as plain data
    coded_action_names: list[str]      # its action head's coded actions, by name


class StartStateEntry(TypedDict):
    """An entry of `start_states`: where a successful code test stopped, saved for trainings of later
    sub-actions to start from (envs.saved_state; the world's bytes are in `file`, never in the state)."""

    file: str
    subtask: str                       # the subtask whose code test saved it
    achievements: list[str]            # unlocked at that moment
    steps: int                         # the episode step it was saved at


class CritiqueLog(CritiqueEntry):
    """An entry of `critiques`: a critique with where it was given."""

    subtask: str
    kind: Kind
    outer_iter: int
    inner_iter: int


class SkillRecord(TypedDict, total=False):
    """A subtask's skill in `skills`: nodes.skills.library.Skill as plain data (`Skill.to_state`). Every key is
    there in a record this code writes; a checkpoint from before the Skill record may hold an older shape
    (`Skill.model_validate` reads both)."""

    name: str
    kind: Kind
    task: str | None
    entry: str | None                  # code: the coded action the executor calls
    sources: list[str]
    policy_path: str | None            # rl: the weights file
    rl_config: dict[str, Any] | None
    success_rate: float
    rate_source: str
    success_given_start: float | None
    started: int | None
    episodes: int
    env_steps: int
    measured_in: str | None            # the round whose attempt became the skill ('outer iteration 2, repair 1')
    replayed: list[str] | None         # code: the earlier skills its tests played first (None: not recorded)
    passing: bool                      # reached the run's skill threshold
    reused: bool                       # taken from the library
    description: str
    run_id: str | None
    updated_at: float


class HeadTest(TypedDict):
    """An entry of the attempt's `code_tested`: a coded action of a policy's head, tested before the training."""

    sub_action: str | None
    report: str
    successes: int | None
    episodes: int | None


Event = dict[str, Any]  # an entry of `events`: {"type": plan | decompose | measure | move | skill | stop | ..., ...}
