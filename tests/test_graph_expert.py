"""The whole graph end to end with the offline expert, on a tiny budget: the repair loop, the move
to RL when revisions run out, limits, plugins."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import GraphBuildError, build_graph, run_config, run_context, start_state
from graph.plugins import NodeSpec, Plugins
from nodes.models.expert import ExpertModel
from nodes.settings import RunSettings


def _settings(tmp_path, **over) -> RunSettings:
    values = dict(task="harvest log", budget_steps=4000, train_steps=1000, eval_episodes=3, test_episodes=8,
                  max_inner_iters=2, max_outer_iters=2, out_dir=tmp_path / "runs", run_id="t1")
    values.update(over)
    return RunSettings(**values)


def _run(settings, model=None, plugins=None, checkpointer=None):
    model = model or ExpertModel()
    graph = build_graph(checkpointer=checkpointer, plugins=plugins)
    extra = {"durability": "sync"} if checkpointer is not None else {}  # sync needs a checkpointer to wait on
    final = graph.invoke(start_state(settings), config=run_config(settings),
                         context=run_context(settings, model, plugins), **extra)
    return graph, model, final


class CriticContexts(ExpertModel):
    """The expert, keeping what each critic call was shown."""

    def __init__(self) -> None:
        super().__init__()
        self.critic_contexts: list[dict] = []

    def structured(self, role, messages, schema, context=None):
        if role == "critic":
            self.critic_contexts.append(dict(context or {}))
        return super().structured(role, messages, schema, context)


@pytest.fixture(scope="module")
def no_revision_run(tmp_path_factory):
    """'harvest log' with no code revisions: the code that misses the worlds with no tree in view at spawn
    cannot be repaired, so the graph moves it to RL (code tests + a 1000-step PPO training + evaluation)."""
    tmp = tmp_path_factory.mktemp("harvest")
    settings = _settings(tmp, max_inner_iters=0, target_success=1.0)  # 7 of 8 must not meet it
    seen = []
    plugins = Plugins(nodes=[NodeSpec(name="watch", fn=lambda state: seen.append(state.get("plugin_next")) or {},
                                      after="critic")])
    graph, model, final = _run(settings, model=CriticContexts(), plugins=plugins, checkpointer=InMemorySaver())
    return settings, model, graph, final, seen


@pytest.mark.slow
def test_code_out_of_revisions_moves_to_rl(no_revision_run):
    settings, model, graph, final, seen = no_revision_run
    report = final["report"]
    assert report["plan"] == ["collect_wood"]
    first = report["measurements"][0]
    assert first["kind"] == "code" and first["episodes"] == 8
    assert first["success_rate"] < 0.9  # the code misses the worlds where no tree is in view at spawn
    move = report["moves"][0]
    assert (move["sub_action"], move["from"], move["to"]) == ("collect_wood", "code", "rl")
    moves = [e for e in final["events"] if e["type"] == "move"]
    moved_by = [c for c in final["critiques"] if c["verdict"] == "move"]
    assert moves and moved_by and moved_by[0]["move_to"] == "rl"  # the critic's own verdict, which stands
    learned = [m for m in report["measurements"] if m["kind"] == "rl"]
    assert learned and learned[0]["steps"] >= 1000
    assert report["loops"]["outer_iterations"] >= 1
    # the learned action head holds the working code and exploration as coded actions, named from the library,
    # and the code as held-out play runs it, which the untrained policy plays (the whole prior goes to it)
    config = final["rl_configs"][0]
    assert config["coded_action_names"] == ["explore", "collect_wood", "play_collect_wood"]
    assert len(config["config"]["coded_actions"]) == 3 and config["config"]["eval_episodes"] == 0
    ppo = config["config"]["ppo"]
    assert ppo["coded_prior"] == 0.9 and ppo["prior_action"] == 2
    assert any("def collect_wood(" in src for src in config["config"]["coded_actions"])
    assert "def play_collect_wood(game)" in config["config"]["coded_actions"][2]


def test_the_critic_compares_a_training_with_the_attempts_before_it(no_revision_run):
    """The critic of the first training is shown the code's best rate and no earlier training: a training
    compared with itself never counts as improving, and the graph stopped training after the first."""
    settings, model, graph, final, seen = no_revision_run
    code_rate = final["report"]["measurements"][0]["success_rate"]
    rl_contexts = [c for c in model.critic_contexts if c["sub_action"]["kind"] == "rl"]
    assert rl_contexts
    first = rl_contexts[0]["best_by_kind"]
    assert first.get("rl") is None and first.get("rl_before") is None
    assert first["code"] == code_rate


@pytest.mark.slow
def test_run_reports_budget_evaluation_and_usage(no_revision_run):
    settings, model, graph, final, seen = no_revision_run
    report = final["report"]
    spent = report["budget"]["training_and_code_test_steps"]
    assert spent == sum(r["steps"] for r in final["results"]) and spent > 1000
    ev = report["evaluation"]
    assert ev["ran"] and ev["episodes"] == 3 and ev["seeds"][0] >= 1_000_000
    assert 0.0 <= ev["ci95"][0] <= ev["success_rate"] <= ev["ci95"][1] <= 1.0
    assert report["budget"]["evaluation_steps"] == ev["steps"]
    assert set(report["usage"]) == {"planner", "slow", "fast", "critic"}
    assert all(u["prompt_tokens"] == 0 and u["completion_tokens"] == 0 for u in report["usage"].values())
    # the critic judges every measured attempt but the coded head entries tested before their training
    tested_first = [e for e in final["events"] if e.get("verdict") == "tested before training"]
    assert tested_first and report["usage"]["critic"]["calls"] == len(final["results"]) - len(tested_first)
    # the plugin after the critic saw each of its decisions before the run went on
    assert seen and all(r in ("fast", "leave") for r in seen)
    assert graph.get_state(run_config(settings)).values["report"] == report


@pytest.mark.slow
def test_a_repair_driven_by_the_test_report_changes_the_outcome(tmp_path):
    # 3 steps per test are too few to reach a tree: the tests end out of steps; the report says so, and
    # the expert's repair (twice the steps, each time) turns the same code into a passing skill.
    settings = _settings(tmp_path, test_max_steps=3, max_inner_iters=3)
    graph, model, final = _run(settings)
    measures = [e for e in final["events"] if e["type"] == "measure"]
    assert measures[0]["verdict"] == "repair" and measures[0]["success_rate"] < 0.5
    first = final["results"][0]
    failures = [p["ended"] for p in first["per_seed"] if not p["success"]]
    assert failures.count("out_of_steps") * 2 >= len(failures), failures  # what the repair rule keys on
    versions = [v for v in final["code_versions"] if v["sub_action"] == "collect_wood"]
    assert len(versions) >= 2
    tests = [r for r in final["results"] if r["kind"] == "code"]
    assert tests[-1]["success_rate"] > tests[0]["success_rate"]


@pytest.mark.slow
def test_later_run_reuses_the_passing_skill(tmp_path):
    settings = _settings(tmp_path)
    _, _, first = _run(settings)
    assert first["skills"]["collect_wood"]["passing"], first["report"]["skills"]
    again = settings.model_copy(update={"run_id": "t2", "eval_episodes": 1})
    _, _, out = _run(again)
    assert out["skills"]["collect_wood"]["reused"] is True
    assert out["env_steps_spent"] == 0 and out["results"] == []
    assert out["evaluation"]["ran"]


def test_model_call_limit_stops_cleanly_with_a_report(tmp_path):
    settings = _settings(tmp_path, max_model_calls=1)
    _, _, out = _run(settings)
    assert "model-call limit" in out["stop_reason"]
    assert out["report"]["finished"] is False
    assert out["evaluation"]["ran"] is False and "nothing to play" in out["evaluation"]["reason"]
    assert out["env_steps_spent"] == 0


@pytest.mark.slow
def test_budget_limit_stops_before_training(tmp_path):
    settings = _settings(tmp_path, budget_steps=300, max_inner_iters=0, target_success=1.0)  # 7 of 8 must not pass
    _, _, out = _run(settings)
    assert "budget" in out["stop_reason"]
    assert [r["kind"] for r in out["results"]] == ["code"]  # no PPO run fits in what is left
    assert out["env_steps_spent"] <= 300
    assert out["skills"]["collect_wood"]["kind"] == "code"  # the best attempt is what was reached
    assert out["evaluation"]["ran"]


def test_plugin_node_after_unknown_node_is_refused():
    plugins = Plugins(nodes=[NodeSpec(name="watch", fn=lambda s: {}, after="nowhere")])
    with pytest.raises(GraphBuildError, match="not a node"):
        build_graph(plugins=plugins)


def test_invoking_without_the_runtime_context_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("nodes.context._default", None)  # no dev-server default (graph.studio sets one)
    settings = _settings(tmp_path)
    with pytest.raises(RuntimeError, match="without its runtime context"):
        build_graph().invoke(start_state(settings), config=run_config(settings))


@pytest.mark.slow
def test_a_subtask_no_code_covers_is_learned_from_an_even_start(tmp_path):
    """wake_up has no few-shot example, so it is learned from the start with only `explore` as a coded
    action. A prior on the coded actions would give exploring 90% of the choices and keep the untrained
    policy from ever sleeping; the head starts even, and the first training finds the achievement."""
    settings = _settings(tmp_path, task="wake_up", budget_steps=3000, train_steps=3000, max_inner_iters=0,
                         max_outer_iters=1)
    _, _, final = _run(settings)
    (config,) = final["rl_configs"]
    assert config["coded_action_names"] == ["explore"] and config["config"]["ppo"]["coded_prior"] == 0.0
    learned = [m for m in final["report"]["measurements"] if m["kind"] == "rl"]
    assert learned and learned[0]["success_rate"] > 0.3
