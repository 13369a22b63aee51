"""Held-out episodes kept as their primitive actions, and played again on a fresh trusted env.

Videos of play (graph/video.py) are made without running agent code a second time. The design:

1. Recording. The final held-out evaluation (`nodes.executor.evaluate_chain`) plays its episodes in a
   `RecordingEnv`, a `CrafterEnv` that notes every primitive action it is stepped with, and beside it
   a label: which skill of the chain and which coded action the trusted caller was running at that
   step. Every primitive step passes through this env in the caller's process, whoever chose it: a
   coded skill's actions come back from the sandbox as action names and `envs.coded.run_option` steps
   them here; a learned skill's policy steps it directly or through `rl.options.CodedActionsWrapper`,
   whose coded calls also end in `run_option`. Labels are set by the trusted side only (the executor
   names the skill and the action it calls; a policy's coded call is named by the wrapper's `info`),
   never taken from text the agent code sends.
2. Replay. `replay(record, on_state)` builds a fresh `CrafterEnv` with the episode's task, step limit
   and reward, resets it to the same held-out seed and steps the recorded actions. Crafter is
   deterministic given the seed and the actions (tests/test_video.py checks it step by step), so the
   replay passes through the same states; only the trusted simulator runs, and only seeds that the
   final evaluation already played are replayed.
3. Pictures. `CrafterBackend.frame` draws a state without touching the world's random generator, so
   filming every k-th state does not change the episode being filmed.

Replay steps are neither agent experience nor evaluation: nothing counts them toward any budget or
into any success rate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envs.crafter_env import CrafterEnv

# primitive action i is stored as the letter chr(ord("a") + i): a 10,000-step episode is a 10 KB string
_FIRST = ord("a")


@dataclass
class EpisodeRecord:
    """One held-out episode as its seed, settings and primitive actions, with a label per step.

    `labels` is a table of (skill, action) pairs; `segments` lists (first step, label index) in step
    order, each label holding until the next segment starts."""

    seed: int
    task: str
    max_steps: int
    reward: str
    action_names: list[str]
    actions: list[int]
    labels: list[tuple[str, str]] = field(default_factory=list)
    segments: list[tuple[int, int]] = field(default_factory=list)
    achievements: list[str] = field(default_factory=list)
    success: bool = False
    reached: int = 0
    chain_length: int = 0

    @property
    def steps(self) -> int:
        return len(self.actions)

    def label_at(self, step: int) -> tuple[str, str]:
        """The (skill, action) that played primitive step `step` (0-based); ('', '') where none was set."""
        found = ("", "")
        for start, index in self.segments:
            if start > step:
                break
            found = self.labels[index]
        return found

    def digest(self) -> str:
        """A short hash of what the episode is (seed, settings, actions, labels): equal digests, equal videos."""
        text = repr((self.seed, self.task, self.max_steps, self.reward, self.action_names, self.actions,
                     self.labels, self.segments))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "task": self.task, "max_steps": self.max_steps, "reward": self.reward,
                "action_names": list(self.action_names),
                "actions": "".join(chr(_FIRST + a) for a in self.actions),
                "labels": [list(pair) for pair in self.labels], "segments": [list(s) for s in self.segments],
                "achievements": list(self.achievements), "success": self.success, "reached": self.reached,
                "chain_length": self.chain_length, "steps": self.steps}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeRecord:
        actions = [ord(c) - _FIRST for c in str(data["actions"])]
        names = [str(n) for n in data["action_names"]]
        if any(not 0 <= a < len(names) for a in actions):
            raise ValueError("an episode record holds an action outside its action names")
        labels = [(str(s), str(a)) for s, a in data.get("labels", [])]
        segments = [(int(s), int(i)) for s, i in data.get("segments", [])]
        if any(not 0 <= i < len(labels) for _, i in segments):
            raise ValueError("an episode record's segment names a label it does not have")
        return cls(seed=int(data["seed"]), task=str(data["task"]), max_steps=int(data["max_steps"]),
                   reward=str(data["reward"]), action_names=names, actions=actions, labels=labels,
                   segments=segments, achievements=[str(a) for a in data.get("achievements", [])],
                   success=bool(data.get("success", False)), reached=int(data.get("reached", 0)),
                   chain_length=int(data.get("chain_length", 0)))


class RecordingEnv(CrafterEnv):
    """A CrafterEnv that keeps the current episode's primitive actions and the label of each step.

    Set `label` to (skill, action) before handing the env to whatever plays; `relabel_last(n, label)`
    names the last `n` steps afterwards (a policy's coded call is known only when it returns).
    Recording costs a list append per step; the env behaves exactly as a CrafterEnv."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.label: tuple[str, str] = ("", "")
        self._actions: list[int] = []
        self._step_labels: list[tuple[str, str]] = []
        self.death_cause: str | None = None  # the episode's, as the env named it on the step the player died

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        out = super().reset(seed=seed, options=options)
        self._actions, self._step_labels = [], []
        self.death_cause = None
        return out

    def step(self, action):
        out = super().step(action)  # raises on a finished episode or a bad action: nothing is recorded then
        self._actions.append(int(action))
        self._step_labels.append(self.label)
        if "death_cause" in out[4]:
            self.death_cause = out[4]["death_cause"]
        return out

    def relabel_last(self, n: int, label: tuple[str, str]) -> None:
        for i in range(max(len(self._step_labels) - max(int(n), 0), 0), len(self._step_labels)):
            self._step_labels[i] = label

    def record(self, **extra: Any) -> EpisodeRecord:
        """The episode so far (since the last reset); `extra`: `success`, `reached`, `chain_length`."""
        labels: list[tuple[str, str]] = []
        segments: list[tuple[int, int]] = []
        for step, label in enumerate(self._step_labels):
            if segments and labels[segments[-1][1]] == label:
                continue
            if label not in labels:
                labels.append(label)
            segments.append((step, labels.index(label)))
        return EpisodeRecord(seed=self._seed, task=self.task.name, max_steps=self.max_steps,
                             reward=self.reward_kind, action_names=list(self.primitive_actions),
                             actions=list(self._actions), labels=labels, segments=segments,
                             achievements=sorted(self.game.achievements), **extra)


@dataclass
class ReplayEnd:
    """Where a replay ended, to compare with the record: equal when the replay is faithful."""

    steps: int
    achievements: list[str]
    inventory: dict[str, int]
    ended: bool
    matches: bool


def replay(record: EpisodeRecord, on_state: Callable[[int, CrafterEnv], None] | None = None) -> ReplayEnd:
    """Play `record`'s actions again on a fresh CrafterEnv reset to its seed (see the module docstring).

    `on_state(t, env)` is called at every state t = 0 .. steps: state t is the one primitive step t is
    played from, and state `steps` the last one. These steps are not counted anywhere (not budget, not
    evaluation): they re-trace an episode the final evaluation already played."""
    env = CrafterEnv(task=record.task, obs_kind="symbolic", max_steps=record.max_steps, reward=record.reward)
    if list(env.primitive_actions) != list(record.action_names):
        raise ValueError("the record's action names are not this env's primitive actions")
    env.reset(seed=record.seed)
    ended = False
    for t, action in enumerate(record.actions):
        if ended:
            raise ValueError(f"the recorded episode goes on after the replay ended at step {t}: "
                             "the replay is not the episode that was recorded")
        if on_state is not None:
            on_state(t, env)
        _, _, terminated, truncated, _ = env.step(action)
        ended = terminated or truncated
    if on_state is not None:
        on_state(record.steps, env)
    achievements = sorted(env.game.achievements)
    return ReplayEnd(steps=record.steps, achievements=achievements, inventory=dict(env.game.inventory),
                     ended=ended, matches=achievements == sorted(record.achievements))
