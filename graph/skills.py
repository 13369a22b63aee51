"""The skill library: coded and learned skills on disk, each with its measured success rate.

Layout under the library folder:

    index.json              name -> skill record (kind, task, success rate, files, provenance)
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
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

INDEX_FILE = "index.json"
INDEX_VERSION = 1
SKILL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")


class SkillLibraryError(RuntimeError):
    """The library on disk is unreadable or a skill is malformed; the message says which file."""


class Skill(BaseModel):
    """One reusable skill. Coded skills carry `source`; learned ones a policy file and `rl_config`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="identifier, a valid Python name (coded skills are called by it)")
    kind: Literal["code", "rl"]
    task: str | None = Field(None, description="the (sub)task it solves, e.g. 'collect_wood'")
    description: str = ""
    success_rate: float = Field(ge=0.0, le=1.0, description="measured on held-out episodes")
    episodes: int = Field(0, ge=0, description="episodes the success rate was measured on")
    env_steps: int = Field(0, ge=0, description="environment steps spent making the skill")
    source: str | None = Field(None, description="Python source (coded skills)")
    policy_file: str | None = Field(None, description="weights path, relative to the library (learned)")
    rl_config: dict[str, Any] | None = Field(None, description="RLConfig as plain data (learned)")
    run_id: str | None = Field(None, description="the run that made it")
    updated_at: float = Field(default_factory=time.time)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SKILL_NAME.match(value):
            raise ValueError(f"skill name must be a Python identifier of letters, digits and '_', got {value!r}")
        return value

    def passes(self, threshold: float) -> bool:
        return self.success_rate >= threshold


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
        record = dict(record)
        code_file = record.pop("code_file", None)
        try:
            if code_file is not None:
                record["source"] = (self.path / code_file).read_text(encoding="utf-8")
            return Skill(**record)
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
        return None if skill.policy_file is None else self.path / skill.policy_file

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

    def put(self, skill: Skill, policy_src: str | Path | None = None, keep_best: bool = False) -> bool:
        """Store `skill` (replacing one of the same name); returns False if nothing was written.

        A learned skill needs `policy_src`, the weights file to copy into the library.
        With `keep_best`, an existing skill of the same name with a higher success rate stays.
        """
        if skill.kind == "code" and not (skill.source and skill.source.strip()):
            raise ValueError(f"coded skill '{skill.name}' needs its source")
        if skill.kind == "rl":
            if policy_src is None and skill.policy_file is None:
                raise ValueError(f"learned skill '{skill.name}' needs its policy file (policy_src)")
            if policy_src is not None and not Path(policy_src).is_file():
                raise ValueError(f"learned skill '{skill.name}': policy file {policy_src} does not exist")
        with self._locked():
            index = self._read_index()
            old = index.get(skill.name)
            if keep_best and old is not None and float(old.get("success_rate", 0.0)) > skill.success_rate:
                return False
            record = skill.model_dump(mode="json", exclude={"source"})
            if skill.kind == "code":
                rel = f"code/{skill.name}.py"
                _atomic_write(self.path / rel, skill.source.encode("utf-8"))
                record["code_file"] = rel
            else:
                if policy_src is not None:
                    rel = f"policies/{skill.name}{Path(policy_src).suffix or '.pt'}"
                    _atomic_copy(Path(policy_src), self.path / rel)
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
