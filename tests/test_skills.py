"""The skill library: coded and learned skills round-trip through disk, writes are atomic, a
broken index is reported with its path, and `passing` applies the threshold."""

import json
import multiprocessing as mp

import pytest

from nodes.skills.library import Skill, SkillLibrary, SkillLibraryError

SOURCE = "def chop_tree(game):\n    yield from game.face('tree')\n    yield 'do'\n"


def coded(rate=0.8, name="chop_tree", task="collect_wood"):
    return Skill(name=name, kind="code", task=task, success_rate=rate, episodes=10, env_steps=1234,
                 source=SOURCE, run_id="r1")


def test_coded_skill_round_trip_and_passing(tmp_path):
    lib = SkillLibrary(tmp_path / "skills")
    assert lib.get("chop_tree") is None and lib.names() == []
    assert lib.put(coded(0.8))
    # a fresh library object reads only what is on disk
    again = SkillLibrary(tmp_path / "skills").get("chop_tree")
    assert again.source == SOURCE and again.success_rate == 0.8 and again.kind == "code"
    assert (tmp_path / "skills" / "code" / "chop_tree.py").read_text() == SOURCE
    index = json.loads((tmp_path / "skills" / "index.json").read_text())
    assert "source" not in index["skills"]["chop_tree"]  # source lives in its own file only
    assert lib.passing("chop_tree", 0.5) is not None
    assert lib.passing("chop_tree", 0.9) is None
    assert lib.passing("missing", 0.0) is None
    assert lib.find_for_task("collect_wood", 0.5).name == "chop_tree"
    assert lib.find_for_task("place_table", 0.0) is None


def test_learned_skill_copies_policy_and_config(tmp_path):
    weights = tmp_path / "run" / "policy.pt"
    weights.parent.mkdir()
    weights.write_bytes(b"\x00weights\x01")
    lib = SkillLibrary(tmp_path / "skills")
    skill = Skill(name="find_tree", kind="rl", task="collect_wood", success_rate=0.6, episodes=20,
                  rl_config={"task": "collect_wood", "ppo": {"total_steps": 20000}})
    assert lib.put(skill, policy_src=weights)
    weights.unlink()  # the library keeps its own copy
    got = lib.get("find_tree")
    assert lib.policy_path(got).read_bytes() == b"\x00weights\x01"
    assert json.loads((tmp_path / "skills" / "policies" / "find_tree.json").read_text())["ppo"]["total_steps"] == 20000
    assert got.rl_config["task"] == "collect_wood"


def test_bad_skills_are_refused(tmp_path):
    lib = SkillLibrary(tmp_path)
    with pytest.raises(ValueError, match="needs its source"):
        lib.put(Skill(name="x", kind="code", success_rate=0.1))
    with pytest.raises(ValueError, match="policy file"):
        lib.put(Skill(name="y", kind="rl", success_rate=0.1))
    with pytest.raises(ValueError, match="does not exist"):
        lib.put(Skill(name="y", kind="rl", success_rate=0.1), policy_src=tmp_path / "nope.pt")
    with pytest.raises(ValueError, match="identifier"):
        Skill(name="bad name", kind="code", success_rate=0.1, source="x")
    with pytest.raises(ValueError):
        Skill(name="z", kind="code", success_rate=1.5, source="x")
    assert lib.names() == []


def test_keep_best_and_replace(tmp_path):
    lib = SkillLibrary(tmp_path)
    lib.put(coded(0.9))
    assert not lib.put(coded(0.3), keep_best=True)
    assert lib.get("chop_tree").success_rate == 0.9
    assert lib.put(coded(0.3))
    assert lib.get("chop_tree").success_rate == 0.3
    assert lib.remove("chop_tree") and not lib.remove("chop_tree")
    assert lib.names() == []


def test_broken_index_names_the_file(tmp_path):
    (tmp_path / "index.json").write_text("{not json")
    with pytest.raises(SkillLibraryError, match="index.json"):
        SkillLibrary(tmp_path).get("anything")


def test_no_temp_files_left_behind(tmp_path):
    lib = SkillLibrary(tmp_path)
    for i in range(3):
        lib.put(coded(0.1 * i, name=f"s{i}"))
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def _writer(path, i):
    SkillLibrary(path).put(coded(0.5, name=f"skill_{i}"))


def test_concurrent_writers_keep_every_skill(tmp_path):
    # the index is read-modify-written under a file lock: no writer loses another's skill
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(tmp_path, i)) for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert SkillLibrary(tmp_path).names() == sorted(f"skill_{i}" for i in range(6))
