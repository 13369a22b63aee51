"""The run's step budget holds: the graph fits the model's tool calls to the env steps left.

A round of code tests may run every test to its step limit, and a model may ask for more PPO steps
than are left. Every step counts toward the budget, so the fast node cuts the calls, whatever model
wrote them, and logs what it changed.
"""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import build_graph, run_config, run_context, start_state
from nodes.limits import fit_calls_to_budget
from nodes.models.expert import ExpertModel
from nodes.settings import RunSettings


def _test(seed: int, max_steps: int | None = 500) -> dict:
    args = {"code": "def main(game):\n    yield 'noop'\n", "task": "collect_wood", "seed": seed}
    if max_steps is not None:
        args["max_steps"] = max_steps
    return {"name": "run_code_in_env", "args": args, "id": f"t{seed}", "type": "tool_call"}


def test_code_tests_share_the_steps_left():
    calls, notes = fit_calls_to_budget([_test(s) for s in range(8)], left=1_000)
    assert [c["args"]["max_steps"] for c in calls] == [125] * 8 and len(notes) == 8
    untouched, none = fit_calls_to_budget([_test(s) for s in range(8)], left=10_000)
    assert none == [] and [c["args"]["max_steps"] for c in untouched] == [500] * 8
    defaulted, _ = fit_calls_to_budget([_test(0, max_steps=None)], left=100)  # the tool's default is 500
    assert defaulted[0]["args"]["max_steps"] == 100
    few, notes = fit_calls_to_budget([_test(s) for s in range(8)], left=3)
    assert [c["args"]["max_steps"] for c in few] == [1, 1, 1] and any("dropped" in n for n in notes)


def test_a_training_gets_at_most_the_steps_left():
    config = {"task": "collect_wood", "ppo": {"total_steps": 20_000, "num_envs": 4}}
    call = {"name": "train_ppo", "args": {"rl_config": config}, "id": "p", "type": "tool_call"}
    (fitted,), notes = fit_calls_to_budget([call], left=5_000)
    assert fitted["args"]["rl_config"]["ppo"] == {"total_steps": 5_000, "num_envs": 4} and notes
    assert config["ppo"]["total_steps"] == 20_000  # the model's own message is not changed in place
    (default,), _ = fit_calls_to_budget([{**call, "args": {"rl_config": {"task": "collect_wood"}}}], left=5_000)
    assert default["args"]["rl_config"]["ppo"]["total_steps"] == 5_000  # PPO's default is 200,000
    broken = {**call, "args": {"rl_config": {"ppo": {"total_steps": "many"}}}}
    assert fit_calls_to_budget([broken], left=5_000) == ([broken], [])  # the tool refuses it, not us


def test_a_tight_run_never_spends_more_than_its_budget(tmp_path):
    budget = 1_500
    settings = RunSettings(task="collect_stone", budget_steps=budget, train_steps=1_000, eval_episodes=2,
                           test_episodes=8, max_inner_iters=2, max_outer_iters=2, out_dir=tmp_path / "runs",
                           run_id="tight")
    graph = build_graph(checkpointer=InMemorySaver())
    final = graph.invoke(start_state(settings), config=run_config(settings),
                         context=run_context(settings, ExpertModel()), durability="sync")
    assert 0 < final["env_steps_spent"] <= budget
    assert any(e["type"] == "budget_fit" for e in final["events"])  # the cut was needed and made
