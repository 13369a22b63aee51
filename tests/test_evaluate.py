"""graph.evaluate: the Crafter-score formula, and the --quick pipeline end to end on a tiny budget."""
from __future__ import annotations

import csv
import json
import math
import re

import pytest

from envs.score import achievement_rates, crafter_score
from envs.tasks import ACHIEVEMENTS


# ---- the benchmark's formula --------------------------------------------------------------
def test_crafter_score_matches_a_hand_computation():
    # rates 0, 9, 99 percent: exp((ln 1 + ln 10 + ln 100) / 3) - 1 = exp(ln 1000 / 3) - 1 = 10 - 1 = 9
    assert crafter_score([0.0, 9.0, 99.0]) == pytest.approx(9.0)
    # one achievement at 3% and one at 15%: sqrt(4 * 16) - 1 = 7
    assert crafter_score({"collect_wood": 3.0, "place_table": 15.0}) == pytest.approx(7.0)


def test_crafter_score_bounds_and_errors():
    assert crafter_score([0.0] * 22) == 0.0
    assert crafter_score([100.0] * 22) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="percentages"):
        crafter_score([0.5, 120.0])
    with pytest.raises(ValueError, match="at least one"):
        crafter_score([])


def test_achievement_rates_cover_all_22_in_percent():
    rates = achievement_rates([{"collect_wood"}, {"collect_wood", "place_table"}, set(), ["wake_up"]])
    assert set(rates) == set(ACHIEVEMENTS) and len(rates) == 22
    assert rates["collect_wood"] == 50.0 and rates["place_table"] == 25.0 and rates["collect_diamond"] == 0.0
    expected = math.exp((math.log(51) + 2 * math.log(26) + 19 * math.log(1)) / 22) - 1
    assert crafter_score(rates) == pytest.approx(expected)
    with pytest.raises(ValueError, match="unknown achievements"):
        achievement_rates([{"fly"}])


def test_pure_code_program_chains_the_expert_actions_and_loads():
    from graph.evaluation.coded import chain_of, pure_code_program
    from sandbox.loader import load_coded_actions

    source = pure_code_program("make_wood_pickaxe")
    names = [a.name for a in load_coded_actions(source)]
    assert chain_of("make_wood_pickaxe") == ["collect_wood", "place_table", "make_wood_pickaxe"]
    assert {"collect_wood", "place_table", "make_wood_pickaxe", "explore", "main"} <= set(names)


def test_cli_rejects_bad_options(capsys):
    from graph.evaluate import main

    assert main(["--tables", "7"]) == 2
    assert "numbers 1-5" in capsys.readouterr().err
    assert main(["--budget", "10"]) == 2
    assert main(["--tasks", "fly to the moon"]) == 2


# ---- --quick end to end --------------------------------------------------------------------
@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    from graph.evaluate import QUICK, run
    from graph.evaluation.tables import EvalConfig

    out = tmp_path_factory.mktemp("results")
    values = {**QUICK, "tasks": ("collect_wood",), "crafter_episode_steps": 200}
    cfg = EvalConfig(out=out, quick=True, **values)
    tables, path = run(cfg, [1, 2, 3, 4, 5], command="test")
    return cfg, tables, path


@pytest.mark.slow
def test_quick_report_has_every_table_with_intervals_and_seeds(quick_report):
    cfg, tables, path = quick_report
    text = path.read_text()
    for title in ("Table 1: obtain diamond", "Table 2: tech-tree tasks", "Table 3: iterations",
                  "Table 4: ablations", "Table 5: Crafter score", "Table 5b: success rate per achievement"):
        assert f"## {title}" in text
    assert "held-out seeds: 1000000..1000002 (3 episodes" in text
    assert text.count("95% Wilson") >= 6
    assert "does not darken at night" in text  # the symbolic view's advantage over pixels, stated
    for t in tables:
        assert (cfg.out / f"{t.key}.csv").is_file()
        png = cfg.out / t.plot
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_quick_rates_come_with_wilson_intervals_and_counted_steps(quick_report):
    cfg, tables, _ = quick_report
    by_key = {t.key: t for t in tables}
    ours = [r for r in by_key["table1_obtain_diamond"].rows if r["source"] == "ours (Crafter)"]
    assert len(ours) == 3
    for r in ours:
        assert r["episodes"] == 3
        assert 0.0 <= r["success_rate_ci_low"] <= r["success_rate"] <= r["success_rate_ci_high"] <= 1.0
        assert 0 < r["env_steps"] <= cfg.budget + 1_000  # a PPO rollout may finish its last option
    rows = list(csv.DictReader(open(cfg.out / "table2_tech_tree.csv")))
    assert [r["task"] for r in rows] == ["collect_wood"]
    assert {"rlgpt_success_rate_ci_low", "pure_rl_success_rate_ci_high", "pure_code_env_steps"} <= set(rows[0])
    scores = by_key["table5_crafter_score"].rows
    assert all(r["episodes"] == 3 for r in scores if r["source"] == "ours (Crafter)")
    assert len(by_key["table5_achievements"].rows) == 22
    # RL-GPT and the coded plan played the same seeds: each achievement is paired, RL-GPT first, and so is the score
    for r in by_key["table5_achievements"].rows:
        difference = re.fullmatch(r"([+-]\d+\.\d) \(\d+ vs \d+, p = \S+\)", r["paired"])
        assert difference and float(difference[1]) == pytest.approx(100 * (r["rlgpt"] - r["pure_code"]), abs=0.06)
    score_notes = by_key["table5_crafter_score"].notes
    assert any(n.startswith("Paired: RL-GPT minus pure code on the same 3 seeds") for n in score_notes)


def test_mcnemar_exact_matches_a_hand_computed_binomial_tail():
    from rl.stats import mcnemar_exact

    # 10 discordant seeds split 9 to 1: p = 2 * (C(10,0) + C(10,1)) / 2**10
    a = [1] * 9 + [0] + [1] * 5 + [0] * 5
    b = [0] * 9 + [1] + [1] * 5 + [0] * 5
    t = mcnemar_exact(a, b)
    assert (t["only_a"], t["only_b"], t["both"], t["neither"]) == (9, 1, 5, 5)
    assert t["p_value"] == pytest.approx(22 / 1024) and t["difference"] == pytest.approx(8 / 20)
    assert mcnemar_exact([1, 0], [1, 0])["p_value"] == 1.0  # no discordant seed: nothing tells them apart
    with pytest.raises(ValueError, match="same seeds"):
        mcnemar_exact([1], [1, 0])


def test_a_paired_score_difference_resamples_seeds_together():
    from envs.score import bootstrap_score_difference

    # wood on all 10 seeds against wood on 5 of them: score(100%) - score(50%), the rest at 0%
    a, b = [["collect_wood"]] * 10, [["collect_wood"]] * 5 + [[]] * 5
    rates_a, rates_b = dict.fromkeys(ACHIEVEMENTS, 0.0), dict.fromkeys(ACHIEVEMENTS, 0.0)
    rates_a["collect_wood"], rates_b["collect_wood"] = 100.0, 50.0
    expected = crafter_score(rates_a) - crafter_score(rates_b)
    diff, low, high = bootstrap_score_difference(a, b, draws=200)
    assert diff == pytest.approx(expected) and 0.0 < low <= diff <= high
    # the same episodes on every seed differ by nothing in any draw
    assert bootstrap_score_difference(b, b, draws=50) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="same seeds"):
        bootstrap_score_difference(a, b[:3])


def test_table5b_pairs_each_achievement_seed_by_seed():
    from graph.evaluation.tables import _paired_achievement

    graph = [["defeat_skeleton"], ["defeat_skeleton"], [], ["defeat_skeleton", "wake_up"]]
    code = [[], ["defeat_skeleton"], [], ["wake_up"]]
    assert _paired_achievement("defeat_skeleton", graph, code) == "+50.0 (2 vs 0, p = 0.5)"
    assert _paired_achievement("wake_up", graph, code) == "+0.0 (0 vs 0, p = 1)"


def test_table5_pairs_rlgpt_with_the_coded_plan_only_on_the_same_seeds(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from graph.evaluation import tables

    def cells(graph: list[list[str]], code: list[list[str]]) -> dict:
        played = {"achievements": [["collect_wood"]] * 4, "episode_steps": [100] * 4}
        return {"rlgpt": {"achievements": graph, "mean_episode_length": 100.0}, "rl_with_code": played,
                "pure_rl": played, "pure_code": {"achievements": code, "mean_episode_length": 100.0}}

    run = SimpleNamespace(cfg=tables.EvalConfig(out=tmp_path, episodes=4))
    graph = [["defeat_skeleton"], ["defeat_skeleton"], [], ["wake_up"]]
    monkeypatch.setattr(tables, "crafter_cells", lambda _: cells(graph, [[], [], [], ["wake_up"]]))
    score, per = tables.tables_crafter(run)
    skeleton = next(r for r in per.rows if r["achievement"] == "defeat_skeleton")
    assert skeleton["paired"] == "+50.0 (2 vs 0, p = 0.5)"
    assert any(n.startswith("Paired: RL-GPT minus pure code on the same 4 seeds: +") for n in score.notes)
    # a coded plan played on other episodes is not paired, and the table says why
    monkeypatch.setattr(tables, "crafter_cells", lambda _: cells(graph, [[], ["wake_up"]]))
    score, per = tables.tables_crafter(run)
    assert all("paired" not in r for r in per.rows) and not any(n.startswith("Paired") for n in score.notes)
    assert "RL-GPT and pure code are not paired: they played 4 and 2 episodes." in per.notes


@pytest.mark.slow
def test_every_cell_keeps_its_per_seed_outcomes_and_table1_pairs_them(quick_report):
    cfg, tables, path = quick_report
    cells = [json.loads(p.read_text()) for p in (cfg.out / "cells").glob("*.json")]
    rated = [c for c in cells if c.get("success_rate") is not None and c.get("episodes")]
    assert rated
    for cell in rated:  # one 1/0 per held-out seed, adding up to the counted successes
        assert len(cell["outcomes"]) == cell["episodes"] and sum(cell["outcomes"]) == cell["successes"]
    assert "McNemar exact p = " in path.read_text()


@pytest.mark.slow
def test_published_rows_are_marked_as_published(quick_report):
    cfg, tables, path = quick_report
    by_key = {t.key: t for t in tables}
    published = [r for r in by_key["table1_obtain_diamond"].rows if r["source"] != "ours (Crafter)"]
    assert {r["method"] for r in published} == {"DreamerV3", "VPT", "DEPS-Oracle", "Plan4MC", "RL-GPT"}
    assert all("published, MineDojo" in r["source"] and "not our run" in r["source"] for r in published)
    crafter = {r["agent"]: r for r in by_key["table5_crafter_score"].rows if r["source"] != "ours (Crafter)"}
    assert crafter["Human experts"]["crafter_score"] == 50.5 and crafter["DreamerV3"]["crafter_score"] == 14.5
    assert all("published, Crafter" in r["source"] for r in crafter.values())
    data = json.loads((cfg.out / "report.json").read_text())
    assert [t["key"] for t in data["tables"]] == [t.key for t in tables]


@pytest.mark.slow
def test_rerun_reuses_every_cached_cell(quick_report, capsys):
    from graph.evaluate import run

    cfg, _, _ = quick_report
    run(cfg, [1, 4], command="test")
    out = capsys.readouterr().out
    assert "0 cells measured" in out and "measured 0" not in out


def test_vector_mode_is_part_of_the_cache_keys_except_for_sync(tmp_path):
    from graph.evaluate import build_parser, config_from
    from graph.evaluation.cache import CellCache
    from graph.evaluation.tables import Runner

    keys = {}
    for argv in ([], ["--vector-mode", "actors"]):
        cfg = config_from(build_parser().parse_args(["--out", str(tmp_path), *argv]))
        runner = Runner(cfg, CellCache(tmp_path / "cells"), log=lambda _: None)
        seen = []
        runner.cell = lambda label, key, compute, seen=seen: seen.append(key) or {}
        runner.pure_rl("collect_wood", 1000)
        runner.rlgpt("collect_wood", 1000)
        keys[cfg.vector_mode] = seen
    from graph.evaluation.tables import GRAPH_RULES_VERSION, RULES_VERSION

    # both rules versions are in it: the graph's, and the coded rules its skills play by
    rlgpt_key = f"rlgpt-full-collect_wood-b1000-e100-s0-t20000-c8-r{GRAPH_RULES_VERSION}.{RULES_VERSION}"
    assert keys["sync"] == ["pure_rl-collect_wood-b1000-e100-s0", rlgpt_key]
    assert keys["actors"] == [k + "-vactors" for k in keys["sync"]]
