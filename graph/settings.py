"""Settings of a run from the defaults, a config file and the command line; saved next to the run.

The settings themselves (`RunSettings`, every field with its one default) live in nodes.settings,
where the nodes read them. Here: merging the sources (lowest to highest priority: the defaults, an
optional TOML/JSON config file, the command line) with errors that name the field and where its
value came from, and writing/reading out_dir/RUN_ID/settings.json so that --resume rebuilds the
same run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib
from pydantic import ValidationError

from envs.tasks import get_task
from nodes.settings import RunSettings, new_run_id

SETTINGS_FILE = "settings.json"  # written into out_dir/RUN_ID/ so that --resume rebuilds the same run


class SettingsError(ValueError):
    """Settings or a config file that cannot be used; the message names the field and the fix."""


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
