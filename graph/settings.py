"""RunSettings: every knob of one run, validated, with errors that name the field.

The defaults are sized so that `python -m graph.run "harvest log"` with the offline expert
finishes in a few minutes on two CPU cores; "obtain diamond" needs a larger `budget_steps`.
Settings come from (lowest to highest priority) the defaults, an optional TOML/JSON config
file, and the command line.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

SUPPORTED_ENVS = ("crafter", "minedojo")
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
SETTINGS_FILE = "settings.json"  # written into out_dir/RUN_ID/ so that --resume rebuilds the same run


class SettingsError(ValueError):
    """Settings or a config file that cannot be used; the message names the field and the fix."""


VectorMode = Literal["sync", "batched", "async", "actors"]  # rl.ppo's modes other than 'auto'
VECTOR_MODE_CHOICES = get_args(VectorMode)


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
    max_inner_iters: int = Field(3, ge=1, le=50, description="fast-agent + critic refinements per decomposition")
    max_wall_s: float = Field(900.0, gt=0, le=30 * 24 * 3600, description="wall-clock limit of the run, seconds")
    max_model_calls: int = Field(300, ge=1, le=1_000_000, description="model calls the run may make")
    seed: int = Field(0, ge=0, lt=1_000_000, description="training/code-test seed (below the evaluation seeds)")
    eval_episodes: int = Field(10, ge=1, le=10_000, description="held-out episodes per success-rate measurement")
    train_steps: int = Field(
        20_000, ge=1_000, le=100_000_000,
        description="environment steps one PPO training of a learned sub-action may use (capped by the budget)")
    test_episodes: int | None = Field(
        None, ge=1, le=1_000, description="code-test seeds per measurement (default: min(8, eval_episodes))")
    vector_mode: VectorMode = Field(
        "sync", description="how PPO trainings step their envs (rl.ppo): 'sync' replays the same on any machine; "
                            "'actors' is the fastest on many cores but its runs depend on the core count")
    target_success: float = Field(
        0.9, ge=0.0, le=1.0, description="success rate at which an attempt passes outright (no more refining)")
    max_replans: int = Field(1, ge=0, le=20, description="re-plans the planner may make after a subtask fails")
    skill_threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="success rate at which a skill counts as passing and is reused")
    out_dir: Path = Field(Path("runs"), description="folder for checkpoints, skills and reports")
    skills_dir: Path | None = Field(
        None, description="skill library folder; default out_dir/skills, shared by all runs in out_dir")
    run_id: str = Field(default_factory=lambda: new_run_id(), description="name of this run (thread id)")

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        from envs.tasks import get_task

        return get_task(value).name  # UnknownTaskError is a ValueError that lists close matches

    @field_validator("env")
    @classmethod
    def _available_env(cls, value: str) -> str:
        if value != "crafter":  # building a backend is the honest availability check; Crafter always is
            from envs.registry import BackendUnavailable, make_backend

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


def new_run_id(task: str = "run") -> str:
    """A readable, unique run id: task, UTC time, and a short random suffix."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{task}-{stamp}-{secrets.token_hex(2)}"


def describe_errors(err: ValidationError, source: str | Mapping[str, str] = "") -> str:
    """One line per bad field: `config.toml: field 'budget_steps': Input should be ...`.

    `source` says where the values came from: one label, or a label per field.
    """
    lines = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(settings)"
        top = str(e["loc"][0]) if e["loc"] else ""
        label = source.get(top, "") if isinstance(source, Mapping) else source
        where = f"{label}: " if label else ""
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            known = ", ".join(RunSettings.model_fields)
            msg = f"unknown setting (known settings: {known})"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        lines.append(f"{where}field '{field}': {msg}")
    return "\n".join(lines)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML or JSON settings file into a dict; SettingsError names the file and the problem.

    A TOML file may hold the settings at top level or under a `[run]` table.
    """
    path = Path(path)
    if not path.is_file():
        raise SettingsError(f"config file {path} does not exist (or is not a file)")
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            data = json.loads(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        else:
            raise SettingsError(f"config file {path}: unknown format '{suffix}', use .toml or .json")
    except json.JSONDecodeError as e:
        raise SettingsError(f"config file {path}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"config file {path}: invalid TOML: {e}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"config file {path}: expected a table/object of settings, got {type(data).__name__}")
    if suffix == ".toml" and set(data) == {"run"} and isinstance(data["run"], dict):
        data = data["run"]
    return data


def make_settings(config_file: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> RunSettings:
    """Defaults <- config file <- overrides (CLI options that were given, None values skipped)."""
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if config_file is not None:
        from_file = load_config_file(config_file)
        values.update(from_file)
        origin.update({k: f"config file {config_file}" for k in from_file})
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    values.update(given)
    origin.update({k: f"option --{k.replace('_', '-')}" for k in given})
    if "run_id" not in values:
        task = values.get("task")
        try:
            from envs.tasks import get_task

            values["run_id"] = new_run_id(get_task(task).name if task else "collect_wood")
        except ValueError:
            pass  # the task validator reports the bad task below
    try:
        return RunSettings(**values)
    except ValidationError as e:
        raise SettingsError(describe_errors(e, origin)) from None


def save_settings(settings: RunSettings, run_dir: Path | None = None) -> Path:
    """Write the settings next to the run so --resume rebuilds exactly the same run."""
    run_dir = run_dir or settings.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / SETTINGS_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(settings.model_dump_json(indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def load_run_settings(out_dir: Path, run_id: str) -> RunSettings:
    """The settings a run was started with; SettingsError lists the runs that exist."""
    path = Path(out_dir) / run_id / SETTINGS_FILE
    if not path.is_file():
        known = list_run_ids(out_dir)
        hint = f" Known runs in {out_dir}: {', '.join(known)}." if known else f" There are no runs in {out_dir}."
        raise SettingsError(f"no run '{run_id}' in {out_dir} (missing {path}).{hint}")
    try:
        return RunSettings.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as e:
        raise SettingsError(describe_errors(e, str(path))) from None


def list_run_ids(out_dir: Path) -> list[str]:
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    return sorted(p.name for p in out_dir.iterdir() if (p / SETTINGS_FILE).is_file())
