"""`python -m graph.draw` writes Mermaid text and a PNG of the real graph, offline; the example
plugin's node shows up in it; langgraph.json points at a factory that builds the graph."""

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from graph import plugins
from graph.draw import draw_png_matplotlib, main, write_drawings

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OUTER_NODES = ("planner", "subtask", "slow", "executor", "report")
ATTEMPT_NODES = ("fast", "tools", "measure", "critic")


@pytest.fixture(autouse=True)
def clean_registry():
    plugins.clear()
    yield
    plugins.clear()


def test_draw_cli_writes_mermaid_and_png(tmp_path):
    out = subprocess.run([sys.executable, "-m", "graph.draw", "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    mmd = (tmp_path / "graph.mmd").read_text()
    assert "graph TD" in mmd
    for node in OUTER_NODES:
        assert f"\t{node}(" in mmd, node
    for node in ATTEMPT_NODES:  # the subgraph is drawn expanded
        assert f"\tattempt\\3a{node}({node}" in mmd, node
    assert "subgraph attempt" in mmd
    # the loops, labelled: the inner one inside the attempt, the outer ones from its exits
    assert "attempt\\3afast -. &nbsp;code test / training / tool&nbsp; .-> attempt\\3atools" in mmd
    assert "attempt\\3atools --> attempt\\3ameasure" in mmd  # a fixed edge: no label
    assert "attempt\\3ameasure -. &nbsp;repair / next step&nbsp; .-> attempt\\3afast" in mmd
    assert ("attempt\\3ameasure -. &nbsp;judge: passed, no gain, revisions out, trained&nbsp; .-> attempt\\3acritic"
            in mmd)
    assert "attempt\\3acritic -. &nbsp;revise: train longer&nbsp; .-> attempt\\3afast" in mmd
    assert "slow -. &nbsp;decomposition&nbsp; .-> attempt\\3a__start__" in mmd
    assert "attempt\\3aleave -. &nbsp;move / revise&nbsp; .-> slow" in mmd
    assert "attempt\\3aleave -. &nbsp;re-plan&nbsp; .-> planner" in mmd
    assert (tmp_path / "graph.png").read_bytes()[:8] == PNG_MAGIC
    assert "graph.png" in out.stdout


def test_matplotlib_fallback_draws_every_node(tmp_path):
    from graph.draw import build_default_graph

    graph = build_default_graph().get_graph()
    draw_png_matplotlib(graph, tmp_path / "g.png")
    data = (tmp_path / "g.png").read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000
    assert main(["--out", str(tmp_path / "m"), "--matplotlib"]) == 0
    assert (tmp_path / "m" / "graph.png").read_bytes()[:8] == PNG_MAGIC


def test_example_plugin_adds_a_node_after_the_critic(tmp_path):
    mod = runpy.run_path(str(ROOT / "examples" / "custom_tool_node.py"), run_name="plugin_example")
    from graph.draw import build_default_graph

    compiled = build_default_graph()
    mmd, _, _ = write_drawings(compiled, tmp_path)
    text = mmd.read_text()
    # the plugin runs right after the critic and then the run goes where the critic chose
    assert "attempt\\3acritic -. &nbsp;then the plugin nodes&nbsp; .-> attempt\\3acritique_digest" in text
    assert "attempt\\3acritique_digest -. &nbsp;pass / move / re-plan / limit&nbsp; .-> attempt\\3aleave" in text
    assert "attempt\\3acritique_digest -. &nbsp;revise: train longer&nbsp; .-> attempt\\3afast" in text
    assert "craftable_items" in text  # the tool joined the fast agent's ToolNode
    update = mod["critique_digest"]({"critiques": [{"subtask": "collect_wood", "sub_action": "chop",
                                                    "verdict": "revise", "success_rate": 0.25, "feedback": "x"}]})
    assert update["events"][0]["message"].startswith("collect_wood/chop: revise at 25%")
    assert "make wood_pickaxe (near table)" in mod["craftable_items"].invoke({"inventory_json": '{"wood": 1}'})


def test_langgraph_json_points_at_a_working_factory(monkeypatch):
    monkeypatch.setattr("nodes.context._default", None)  # the factory sets the dev server's default context
    spec = json.loads((ROOT / "langgraph.json").read_text())
    target = spec["graphs"]["rlgpt"]
    path, func = target.split(":")
    assert (ROOT / path).is_file()
    monkeypatch.delenv("RLGPT_MODEL", raising=False)
    monkeypatch.delenv("RLGPT_CONFIG", raising=False)
    factory = runpy.run_path(str(ROOT / path))[func]
    graph = factory()
    assert set(OUTER_NODES) | {"attempt"} <= set(graph.get_graph().nodes)
    assert {f"attempt:{n}" for n in ATTEMPT_NODES} <= set(graph.get_graph(xray=1).nodes)
