"""Skills: the one record of a skill, and the library that keeps skills on disk.

A `Skill` is what a run made (or reused) for one subtask: a coded skill runs its `entry` action
from `sources`; a learned one runs the PPO policy at `policy_path`, with `sources` as the coded
actions of its action head. The same record is used everywhere: the graph state holds its plain
dump (`to_state()`, because the checkpointer stores plain data), the library below stores it, the
executor plays it and the report lists it. Validation also reads the older shapes, so checkpoints
and skill folders written before this record keep working: a state record keyed by `subtask`, a
library record whose entry point sat in `description` ("entry: NAME"), a single `source` text.

Library layout under its folder:

    index.json              name -> skill record (kind, task, entry, success rate, files, provenance)
    code/<name>.py          source of a coded skill
    policies/<name>.pt      weights of a learned skill (copied in, so the run folder may go)
    policies/<name>.json    its RLConfig (what the policy sees, reward, coded actions, PPO settings)

Every write goes to a temporary file first and is then renamed over the old one, so a killed
run never leaves a half-written index or skill. The index update holds an exclusive file lock,
so two runs sharing one library do not lose each other's skills.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nodes.entries import SkillRecord

INDEX_FILE = "index.json"
INDEX_VERSION = 2  # 2: explicit `entry` and `rate_source`; 1 kept the entry point in `description`
SKILL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
OLD_ENTRY_PREFIX = "entry: "  # how version 1 stored a coded skill's entry point, in `description`

SkillKind = Literal["code", "rl"]
# Where a skill's success_rate comes from. None of them is the executor's held-out evaluation of the
# chained skills (that is state['evaluation']):
#   code_tests  the code tests' success over their training-range seeds (a code attempt);
#   training    PPO's moving-window success while training (a learned attempt);
#   validation  PPO's own evaluation on validation seeds (envs.seeds), used when training finished no episode to rate.
# chain_training: a training whose episodes started where the chain reached the skill (nodes.starts)
RateSource = Literal["code_tests", "training", "chain_training", "validation", "none"]
RATE_SOURCE_OF_KIND: dict[str, str] = {"code": "code_tests", "rl": "training"}


class SkillLibraryError(RuntimeError):
    """The library on disk is unreadable or a skill is malformed; the message says which file."""


class Skill(BaseModel):
    """One skill: its code or policy, how to start it, and the rate measured while making it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("", description="identifier, a valid Python name; the library keys skills by it "
                                      "('' for a record that is only played, never stored)")
    kind: SkillKind
    task: str | None = Field(None, description="the (sub)task it solves, e.g. 'collect_wood'")
    entry: str | None = Field(None, description="code: the coded action the executor calls "
                                                "(None: the last action the sources define)")
    sources: list[str] = Field(default_factory=list,
                               description="code: the skill's functions; rl: the coded actions of the policy")
    policy_path: str | None = Field(None, description="rl: the weights file")
    rl_config: dict[str, Any] | None = Field(None, description="rl: its RLConfig as plain data")
    success_rate: float = Field(0.0, ge=0.0, le=1.0,
                                description="success measured while making the skill, from a fresh world; "
                                            "`rate_source` says how (never the chain's held-out evaluation)")
    rate_source: RateSource = Field(description="what measured success_rate (see RateSource)")
    success_given_start: float | None = Field(
        None, ge=0.0, le=1.0, description="code tests that replay earlier skills first: the success over "
                                          "the runs that reached this skill's start")
    episodes: int = Field(0, ge=0, description="code-test episodes success_rate was measured on "
                                               "(0 for a training rate)")
    started: int | None = Field(None, ge=0, description="of those episodes, the runs that reached this skill's "
                                                        "start (success_given_start is over them)")
    env_steps: int = Field(0, ge=0, description="environment steps spent making the skill (0 when reused)")
    measured_in: str | None = Field(None, description="the round whose attempt became the skill, as the prompts "
                                                      "count them: 'outer iteration 2, repair 1'")
    replayed: list[str] | None = Field(None, description="code: the earlier skills of the plan its tests played first, "
                                                        "in plan order (None: not recorded, made before graph "
                                                        "rules 18; nodes.executor then goes by the recipe)")
    passing: bool = Field(False, description="its judged rate reached the run's skill threshold")
    reused: bool = Field(False, description="taken from the library: an earlier run made it")
    description: str = ""
    run_id: str | None = Field(None, description="the run that saved it to the library")
    updated_at: float = Field(default_factory=time.time)

    @model_validator(mode="before")
    @classmethod
    def _older_shapes(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if "subtask" in data:  # state records before this model named the task `subtask`
            subtask = data.pop("subtask")
            data.setdefault("task", subtask)
        if "source" in data:  # one program text: library version 1, and Skill(source=...) for short
            source = data.pop("source")
            if source is not None and "sources" not in data:
                data["sources"] = [source]
        description = data.get("description")
        if "entry" not in data and isinstance(description, str) and description.startswith(OLD_ENTRY_PREFIX):
            data["entry"] = description.removeprefix(OLD_ENTRY_PREFIX).strip() or None
            data["description"] = ""
        if data.get("rate_source") is None and data.get("kind") in RATE_SOURCE_OF_KIND:
            data["rate_source"] = RATE_SOURCE_OF_KIND[data["kind"]]
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if value and not SKILL_NAME.match(value):
            raise ValueError(f"skill name must be a Python identifier of letters, digits and '_', got {value!r}")
        return value

    @property
    def source(self) -> str | None:
        """A coded skill's program: its functions in one text (None for a learned skill)."""
        return "\n\n".join(self.sources) if self.kind == "code" and self.sources else None

    def passes(self, threshold: float) -> bool:
        return self.success_rate >= threshold

    def to_state(self) -> SkillRecord:
        """The plain data the graph state (and its checkpoint) holds for this skill."""
        return cast(SkillRecord, self.model_dump())


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _atomic_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class SkillLibrary:
    """Skills in a folder; see the module docstring for the layout."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # ---- reading -------------------------------------------------------------------------
    @property
    def index_path(self) -> Path:
        return self.path / INDEX_FILE

    def _read_index(self) -> dict[str, dict[str, Any]]:
        if not self.index_path.exists():
            return {}
        try:
            data = json.loads(self.index_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise SkillLibraryError(f"skill index {self.index_path} is unreadable ({e}); "
                                    "delete it to start an empty library") from None
        if not isinstance(data, dict) or not isinstance(data.get("skills"), dict):
            raise SkillLibraryError(f"skill index {self.index_path} has no 'skills' table; "
                                    "delete it to start an empty library")
        return data["skills"]

    def _to_skill(self, record: dict[str, Any]) -> Skill:
        """A Skill from its index record: files become `sources` and an absolute `policy_path`."""
        record = dict(record)
        code_file = record.pop("code_file", None)
        policy_file = record.pop("policy_file", None)
        try:
            if code_file is not None:
                record["sources"] = [(self.path / code_file).read_text(encoding="utf-8")]
            if policy_file is not None:
                record["policy_path"] = str(self.path / policy_file)
            if record.get("kind") == "rl" and not record.get("sources"):
                record["sources"] = list((record.get("rl_config") or {}).get("coded_actions", []))
            return Skill.model_validate(record)
        except (OSError, ValidationError) as e:
            raise SkillLibraryError(f"skill '{record.get('name')}' in {self.path} is broken: {e}") from None

    def names(self) -> list[str]:
        return sorted(self._read_index())

    def get(self, name: str) -> Skill | None:
        record = self._read_index().get(name)
        return None if record is None else self._to_skill(record)

    def all(self) -> list[Skill]:
        return [self._to_skill(r) for _, r in sorted(self._read_index().items())]

    def passing(self, name: str, threshold: float) -> Skill | None:
        """The skill if it exists and its measured success rate reaches `threshold`, else None."""
        skill = self.get(name)
        return skill if skill is not None and skill.passes(threshold) else None

    def find_for_task(self, task: str, threshold: float) -> Skill | None:
        """The best passing skill that solves `task` (a later run reuses it instead of redoing it)."""
        best = [s for s in self.all() if s.task == task and s.passes(threshold)]
        return max(best, key=lambda s: (s.success_rate, s.updated_at)) if best else None

    def policy_path(self, skill: Skill) -> Path | None:
        """Absolute path of a learned skill's weights."""
        return None if skill.policy_path is None else Path(skill.policy_path)

    def code_path(self, skill: Skill) -> Path:
        """Where the library keeps a coded skill's source."""
        return self.path / "code" / f"{skill.name}.py"

    # ---- writing -------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @staticmethod
    def _files_of(skill: Skill, policy_src: str | Path | None) -> tuple[str | None, Path | None]:
        """(source, weights) to store: a coded skill's program or a learned skill's weights file."""
        if not skill.name:
            raise ValueError("a skill needs a name (a Python identifier) to be stored")
        if skill.kind == "code":
            if not (skill.source and skill.source.strip()):
                raise ValueError(f"coded skill '{skill.name}' needs its source")
            return skill.source, None
        weights = policy_src if policy_src is not None else skill.policy_path
        if weights is None:
            raise ValueError(f"learned skill '{skill.name}' needs its policy file (policy_src)")
        if not Path(weights).is_file():
            raise ValueError(f"learned skill '{skill.name}': policy file {weights} does not exist")
        return None, Path(weights)

    def put(self, skill: Skill, policy_src: str | Path | None = None, keep_best: bool = False) -> bool:
        """Store `skill` (replacing one of the same name); returns False if nothing was written.

        A learned skill's weights (`policy_src`, else its `policy_path`) are copied into the library.
        With `keep_best`, an existing skill of the same name with a higher success rate stays.
        """
        source, weights = self._files_of(skill, policy_src)
        with self._locked():
            index = self._read_index()
            old = index.get(skill.name)
            if keep_best and old is not None and float(old.get("success_rate", 0.0)) > skill.success_rate:
                return False
            # files hold the code and the weights; passing, reused, the round that made it (measured_in) and the
            # skills its tests replayed (replayed, of this run's plan) describe
            # one run's use of the skill
            record = skill.model_dump(mode="json",
                                      exclude={"sources", "policy_path", "passing", "reused", "measured_in",
                                               "replayed"})
            if source is not None:
                rel = f"code/{skill.name}.py"
                _atomic_write(self.path / rel, source.encode("utf-8"))
                record["code_file"] = rel
            elif weights is not None:
                rel = f"policies/{skill.name}{weights.suffix or '.pt'}"
                target = self.path / rel
                if not (target.exists() and os.path.samefile(weights, target)):  # re-putting a library skill
                    _atomic_copy(weights, target)
                record["policy_file"] = rel
                _atomic_write(self.path / f"policies/{skill.name}.json",
                              json.dumps(skill.rl_config or {}, indent=2).encode("utf-8"))
            index[skill.name] = record
            self._write_index(index)
        return True

    def remove(self, name: str) -> bool:
        with self._locked():
            index = self._read_index()
            if index.pop(name, None) is None:
                return False
            self._write_index(index)
        return True

    def _write_index(self, skills: dict[str, dict[str, Any]]) -> None:
        payload = {"version": INDEX_VERSION, "skills": skills}
        _atomic_write(self.index_path, json.dumps(payload, indent=2, sort_keys=True).encode("utf-8"))
