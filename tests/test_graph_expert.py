"""The whole graph end to end with the offline expert, on a tiny budget."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import GraphBuildError, build_graph, run_config, start_state
from graph.plugins import NodeSpec, Plugins
from nodes.expert import ExpertModel
from nodes.settings import RunSettings


def _settings(tmp_path, **over) -> RunSettings:
    values = dict(task="harvest log", budget_steps=4000, train_steps=1000, eval_episodes=3, test_episodes=8,
                  max_inner_iters=2, max_outer_iters=2, out_dir=tmp_path / "runs", run_id="t1")
    values.update(over)
    return RunSettings(**values)


@pytest.fixture(scope="module")
def harvest_run(tmp_path_factory):
    """One real run of 'harvest log' (code tests + a 1000-step PPO training + held-out evaluation)."""
    tmp = tmp_path_factory.mktemp("harvest")
    settings = _settings(tmp)
    model = ExpertModel()
    seen = []
    plugins = Plugins(nodes=[NodeSpec(name="watch", fn=lambda state: seen.append(state["route"]) or {},
                                      after="critic")])
    graph = build_graph(settings, model, checkpointer=InMemorySaver(), plugins=plugins)
    final = graph.invoke(start_state(settings), config=run_config(settings), durability="sync")
    return settings, model, graph, final, seen


@pytest.mark.slow
def test_harvest_log_moves_code_to_rl_by_measured_numbers(harvest_run):
    settings, model, graph, final, seen = harvest_run
    report = final["report"]
    assert report["plan"] == ["collect_wood"]
    first = report["measurements"][0]
    assert first["kind"] == "code" and first["episodes"] == 8
    assert first["success_rate"] < 0.9  # the code misses the worlds where no tree is in view at spawn
    move = report["moves"][0]
    assert (move["sub_action"], move["from"], move["to"]) == ("collect_wood", "code", "rl")
    assert move["success_rate"] == first["success_rate"]
    learned = [m for m in report["measurements"] if m["kind"] == "rl"]
    assert learned and learned[0]["steps"] >= 1000
    assert report["loops"]["outer_iterations"] >= 1
    # the learned action head holds the working code and exploration as coded actions
    config = final["rl_configs"][0]["config"]
    assert len(config["coded_actions"]) == 2 and config["eval_episodes"] == 0
    assert any("def collect_wood(" in src for src in config["coded_actions"])


@pytest.mark.slow
def test_harvest_log_reports_budget_evaluation_and_usage(harvest_run):
    settings, model, graph, final, seen = harvest_run
    report = final["report"]
    spent = report["budget"]["training_and_code_test_steps"]
    assert spent == sum(r["steps"] for r in final["results"]) and spent > 1000
    ev = report["evaluation"]
    assert ev["ran"] and ev["episodes"] == 3 and ev["seeds"][0] >= 1_000_000
    assert 0.0 <= ev["ci95"][0] <= ev["success_rate"] <= ev["ci95"][1] <= 1.0
    assert report["budget"]["evaluation_steps"] == ev["steps"]
    assert set(report["usage"]) == {"planner", "slow", "fast", "critic"}
    assert all(u["prompt_tokens"] == 0 and u["completion_tokens"] == 0 for u in report["usage"].values())
    assert report["usage"]["critic"]["calls"] == len(final["results"])
    assert seen and all(r in ("fast", "slow", "subtask", "planner", "executor") for r in seen)
    # the checkpointer holds the finished run
    assert graph.get_state(run_config(settings)).values["report"] == report


@pytest.mark.slow
def test_later_run_reuses_the_passing_skill(harvest_run, tmp_path):
    settings, model, graph, final, seen = harvest_run
    if not final["skills"]["collect_wood"]["passing"]:
        pytest.fail(f"the first run did not produce a passing skill: {final['report']['skills']}")
    again = settings.model_copy(update={"run_id": "t2", "eval_episodes": 1})
    model2 = ExpertModel()
    out = build_graph(again, model2).invoke(start_state(again), config=run_config(again))
    assert out["skills"]["collect_wood"]["reused"] is True
    assert out["env_steps_spent"] == 0 and out["results"] == []
    assert out["evaluation"]["ran"]


def test_model_call_limit_stops_cleanly_with_a_report(tmp_path):
    settings = _settings(tmp_path, max_model_calls=1)
    out = build_graph(settings, ExpertModel()).invoke(start_state(settings), config=run_config(settings))
    assert "model-call limit" in out["stop_reason"]
    assert out["report"]["finished"] is False
    assert out["evaluation"]["ran"] is False and "incomplete" in out["evaluation"]["reason"]
    assert out["env_steps_spent"] == 0


@pytest.mark.slow
def test_budget_limit_stops_before_training(tmp_path):
    settings = _settings(tmp_path, budget_steps=300)
    out = build_graph(settings, ExpertModel()).invoke(start_state(settings), config=run_config(settings))
    assert "budget" in out["stop_reason"]
    assert [r["kind"] for r in out["results"]] == ["code"]  # no PPO run fits in what is left
    assert out["env_steps_spent"] <= 300
    assert out["skills"]["collect_wood"]["kind"] == "code"  # the best attempt is what was reached
    assert out["evaluation"]["ran"]


def test_plugin_node_after_unknown_node_is_refused(tmp_path):
    plugins = Plugins(nodes=[NodeSpec(name="watch", fn=lambda s: {}, after="nowhere")])
    with pytest.raises(GraphBuildError, match="not a node"):
        build_graph(_settings(tmp_path), ExpertModel(), plugins=plugins)
