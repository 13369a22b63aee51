"""RunSettings: every knob of one run, validated, with errors that name the field.

This is the one place a setting's default is declared: the nodes read their knobs from a
RunSettings object, and the command line (graph.run) shows the same defaults in --help. Loading
settings from a config file and the command line, and saving them next to a run, is the
application shell's job (graph.settings).

The defaults are sized so that `python -m graph.run "harvest log"` with the offline expert
finishes in a few minutes on two CPU cores; "obtain diamond" needs a larger `budget_steps`.
"""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from envs.tasks import get_task
from prompts.facts import DEFAULT_SKILL_THRESHOLD
from rl import MIN_TRAIN_STEPS

SUPPORTED_ENVS = ("crafter", "minedojo")
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
CODE_TEST_EPISODES = 8  # code-test seeds per measurement when test_episodes is not set (at most eval_episodes)

VectorMode = Literal["sync", "batched", "async", "actors", "ray"]  # rl.ppo's modes other than 'auto'
VECTOR_MODE_CHOICES = get_args(VectorMode)


def new_run_id(task: str = "run") -> str:
    """A readable, unique run id: task, UTC time, and a short random suffix."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{task}-{stamp}-{secrets.token_hex(2)}"


class RunSettings(BaseModel):
    """The configuration of one RL-GPT run (see docs/CONTRACTS.md, graph/)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    task: str = Field("collect_wood", description="task name or plain-words alias, e.g. 'obtain diamond'")
    env: Literal["crafter", "minedojo"] = Field("crafter", description="environment backend")
    model: str | None = Field(
        None, description="model name for an OpenAI-compatible server; None or 'expert' = the offline "
                          "rule-based expert (no language model)")
    budget_steps: int = Field(
        100_000, ge=100, le=1_000_000_000,
        description="environment steps the whole run may spend (code tests, training and evaluation)")
    max_outer_iters: int = Field(3, ge=1, le=50, description="slow-agent revisions of a decomposition")
    max_inner_iters: int = Field(
        3, ge=0, le=50, description="fast-agent revisions per decomposition: repairs of its code from the test "
                                    "report, or longer trainings the critic asks for")
    max_wall_s: float | None = Field(
        None, gt=0, le=30 * 24 * 3600,
        description="wall-clock limit of the run, seconds (default: none; the step budget and the model-call "
                    "limit bound a run, and a served model's answers may take long)")
    max_model_calls: int = Field(300, ge=1, le=1_000_000, description="model calls the run may make")
    seed: int = Field(0, ge=0, lt=1_000_000, description="training/code-test seed (below the evaluation seeds)")
    eval_episodes: int = Field(50, ge=1, le=10_000, description="held-out episodes per success-rate measurement")
    train_steps: int = Field(
        20_000, ge=MIN_TRAIN_STEPS, le=100_000_000,
        description="environment steps one PPO training of a learned sub-action may use (capped by the budget)")
    test_episodes: int | None = Field(
        None, ge=1, le=1_000,
        description=f"code-test seeds per measurement (default: min({CODE_TEST_EPISODES}, eval_episodes)); twice "
                    "as many for the plan's last subtask of a one-achievement task, which replays the whole chain")
    test_max_steps: int | None = Field(
        None, ge=1, le=10_000, description="primitive steps per code test (default: the subtask's own step limit)")
    eval_max_steps: int | None = Field(
        None, ge=1, le=100_000,
        description="primitive steps per held-out evaluation episode (default: the task's own step limit)")
    vector_mode: VectorMode = Field(
        "actors", description="how PPO trainings step their envs (rl.ppo): 'actors' in 2 worker processes that "
                              "act and step (the same run on any machine; the fastest on 2 or more cores), "
                              "'sync' in this process, 'ray' as 'actors' on a Ray cluster (docs/scaling.md)")
    target_success: float = Field(
        0.9, ge=0.0, le=1.0, description="success rate at which an attempt passes outright (no more refining)")
    max_replans: int = Field(1, ge=0, le=20, description="re-plans the planner may make after a subtask fails "
                                                          "(past them, the task itself is learned once)")
    skill_threshold: float = Field(
        DEFAULT_SKILL_THRESHOLD, ge=0.0, le=1.0,
        description="success rate at which a skill counts as passing and is reused")
    out_dir: Path = Field(Path("runs"), description="folder for checkpoints, skills and reports")
    skills_dir: Path | None = Field(
        None, description="skill library folder; default out_dir/skills, shared by all runs in out_dir")
    run_id: str = Field(default_factory=lambda: new_run_id(), description="name of this run (thread id)")

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        return get_task(value).name  # UnknownTaskError is a ValueError that lists close matches

    @field_validator("env")
    @classmethod
    def _available_env(cls, value: str) -> str:
        if value != "crafter":  # building a backend is the honest availability check; Crafter always is
            from envs.registry import BackendUnavailable, make_backend  # heavy: only for other backends

            try:
                make_backend(value)
            except BackendUnavailable as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        return None if value == "" or value.lower() == "expert" else value

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str) -> str:
        if not RUN_ID_PATTERN.match(value):
            raise ValueError("a run id is 1-100 characters of letters, digits, '_', '.', '-', "
                             f"starting with a letter or digit; got {value!r}")
        return value

    @property
    def code_test_episodes(self) -> int:
        """Code-test seeds per measurement: `test_episodes`, or min(8, eval_episodes) when unset."""
        if self.test_episodes is not None:
            return self.test_episodes
        return min(CODE_TEST_EPISODES, self.eval_episodes)

    @property
    def run_dir(self) -> Path:
        return self.out_dir / self.run_id

    @property
    def skills_path(self) -> Path:
        return self.skills_dir if self.skills_dir is not None else self.out_dir / "skills"

    @property
    def checkpoint_path(self) -> Path:
        return self.out_dir / "checkpoints.sqlite"

    @property
    def model_label(self) -> str:
        return self.model or "expert (rule-based, no language model)"

