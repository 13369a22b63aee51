"""The pictures of the graph and of a run: every conditional edge labelled in the Mermaid text, the
Graphviz dot source and the matplotlib drawing; a real run's overlay counts checked against its raw
checkpoint rows and its node log; the timeline's rows; report.md's Pictures section; a drawing that
fails costs a warning, never the run."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from graph import plugins
from graph.builder import ATTEMPT_EXITS, ROUTE_LABELS, command_targets
from graph.draw import build_default_graph, main, write_drawings
from graph.pictures import dot_source, draw_png_matplotlib, mermaid_text, pygraphviz_available
from graph.report import VIDEO_DIR, render_markdown, run_pictures
from graph.timeline import draw_timeline, timeline_rows

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUN_ID = "pictures"
# three subtasks, each solved by its first code test on 4 seeds: about 10 s with the offline expert
RUN_ARGS = ["make wood pickaxe", "--run-id", RUN_ID, "--budget-steps", "6000", "--eval-episodes", "3",
            "--test-episodes", "4", "--max-inner-iters", "1", "--max-outer-iters", "2", "--no-live"]


@pytest.fixture(autouse=True)
def clean_registry():
    plugins.clear()
    yield
    plugins.clear()


def every_label() -> list[str]:
    return [label for labels in ROUTE_LABELS.values() for label in labels.values()] + list(ATTEMPT_EXITS.values())


# ---- the plain graph: every conditional edge says when it is taken --------------------------------
def test_route_labels_cover_every_command_target():
    from graph.builder import ATTEMPT_NODES, OUTER_NODES

    for name, fn in {**OUTER_NODES, **ATTEMPT_NODES}.items():
        targets = set(command_targets(fn))
        assert set(ROUTE_LABELS.get(name, {})) == targets, name
        labels = list(ROUTE_LABELS.get(name, {}).values())
        assert len(set(labels)) == len(labels), f"{name}: two routes share a label"


@pytest.mark.parametrize("xray", [0, 1])
def test_every_conditional_edge_is_labelled(xray):
    graph = build_default_graph(with_plugins=False).get_graph(xray=xray)
    conditional = [e for e in graph.edges if e.conditional]
    assert conditional
    assert all(e.data for e in conditional), [(e.source, e.target) for e in conditional if not e.data]
    mmd, dot = mermaid_text(graph), dot_source(graph)
    inner = ("fast", "measure", "critic")  # drawn only when the attempt is expanded
    for node, labels in ROUTE_LABELS.items():
        for label in labels.values():
            if xray or node not in inner:
                assert f"&nbsp;{label}&nbsp;" in mmd, label
                assert f'label="{label}"' in dot, label
    for label in ATTEMPT_EXITS.values():
        assert f'label="{label}"' in dot


def test_graphviz_drawing_is_labelled_and_rendered(tmp_path):
    assert pygraphviz_available(), "the draw extra (pygraphviz) is part of the dev install: make setup"
    import pygraphviz

    compiled = build_default_graph(with_plugins=False)
    mmd, png, how = write_drawings(compiled, tmp_path)
    assert how == "graphviz"
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 20_000
    dot = (tmp_path / "graph.dot").read_text()
    # inside the expanded attempt: a cluster, its own routes labelled
    assert 'subgraph "cluster_attempt"' in dot
    assert '"attempt:critic" -> "attempt:fast" [label="revise: train longer", style="dashed"' in dot
    assert '"attempt:fast" -> "attempt:tools" [label="code test / training / tool", style="dashed"' in dot
    assert '"attempt:leave" -> "planner" [label="re-plan", style="dashed"' in dot
    parsed = pygraphviz.AGraph(string=dot)  # Graphviz reads back the same nodes and edges
    graph = compiled.get_graph(xray=1)
    assert parsed.number_of_nodes() == len(graph.nodes) and parsed.number_of_edges() == len(graph.edges)
    labelled = {(e[0], e[1]): e.attr["label"] for e in parsed.edges() if e.attr.get("label")}
    assert labelled[("attempt:fast", "attempt:critic")] == ROUTE_LABELS["fast"]["critic"]
    assert labelled[("subtask", "slow")] == ROUTE_LABELS["subtask"]["slow"]
    assert "graph TD" in mmd.read_text()


def test_matplotlib_drawing_draws_every_label(tmp_path):
    graph = build_default_graph(with_plugins=False).get_graph(xray=1)
    drawn = draw_png_matplotlib(graph, tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:8] == PNG_MAGIC
    assert set(every_label()) <= set(drawn["edges"])
    assert {"planner", "fast", "critic", "tools", "leave", "executor"} <= set(drawn["nodes"])


# ---- a real run drawn over the graph --------------------------------------------------------------
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pics") / "runs"
    done = subprocess.run([sys.executable, "-m", "graph.run", *RUN_ARGS, "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    return out, done


def checkpoint_rows(out: Path) -> dict[str, list[int]]:
    """namespace -> the metadata steps of its checkpoints, read straight from SQLite."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(out / "checkpoints.sqlite")
    try:
        saver = SqliteSaver(conn)
        rows: dict[str, list[int]] = {}
        for c in saver.list({"configurable": {"thread_id": RUN_ID}}):
            rows.setdefault(c.config["configurable"]["checkpoint_ns"], []).append(c.metadata["step"])
        return rows
    finally:
        conn.close()


def read_run(out: Path, collapse: bool = False):
    from langgraph.checkpoint.sqlite import SqliteSaver

    from graph.run_history import read_history

    conn = sqlite3.connect(out / "checkpoints.sqlite", check_same_thread=False)
    try:
        graph = build_default_graph(with_plugins=False, checkpointer=SqliteSaver(conn))
        history = read_history(graph, {"configurable": {"thread_id": RUN_ID}}, out / RUN_ID)
        return graph, history.collapsed() if collapse else history
    finally:
        conn.close()


def test_run_writes_pictures_and_the_report_links_them(run):
    out, done = run
    run_dir = out / RUN_ID
    for name in ("graph_run.png", "timeline.png"):
        assert (run_dir / name).read_bytes()[:8] == PNG_MAGIC, name
        assert f"picture: {run_dir / name}" in done.stdout
    report = (run_dir / "report.md").read_text()
    pictures = report.split("## Pictures", 1)[1]
    assert "![" in pictures and "](graph_run.png)" in pictures and "](timeline.png)" in pictures
    assert "[graph_run.mmd](graph_run.mmd)" in pictures
    for gif in sorted((run_dir / VIDEO_DIR).glob("*.gif")):  # whatever videos the run made, linked relatively
        assert f"]({VIDEO_DIR}/{gif.name})" in pictures
    assert "warning: no pictures" not in done.stderr


def test_overlay_counts_equal_the_checkpoint_history(run):
    out, _ = run
    _, history = read_run(out)
    stats = history.node_stats()
    rows = checkpoint_rows(out)
    outer = rows.pop("")
    # every chain starts with an input checkpoint (step -1) and one after __start__ (step 0); each later
    # checkpoint is one node's step. The attempt's exit (leave) jumps to the outer graph without one.
    assert sorted(outer) == list(range(-1, len(outer) - 1))
    stays = len(rows)
    assert stays >= 3 and all(ns.startswith("attempt:") for ns in rows)
    inner = {n: s for n, s in stats.items() if n.startswith("attempt:")}
    assert sum(s.visits for n, s in inner.items() if n != "attempt:leave") == sum(len(r) - 2 for r in rows.values())
    assert inner["attempt:leave"].visits == stays
    assert sum(s.visits for n, s in stats.items() if n not in inner) + stays == len(outer) - 2
    # the node log (events.jsonl: every finished node but the exit) agrees node by node
    logged = [json.loads(line)["node"] for line in (out / RUN_ID / "events.jsonl").read_text().splitlines()]
    assert Counter(logged) == Counter({n.split(":")[-1]: s.visits for n, s in stats.items() if n != "attempt:leave"})
    assert [r.node.split(":")[-1] for r in history.runs if r.node != "attempt:leave"] == logged
    # steps: the tools node's tool calls are the budget spent; the executor's the held-out evaluation's
    report = json.loads((out / RUN_ID / "report.json").read_text())
    assert stats["attempt:tools"].env_steps == report["env_steps"]["spent"] > 0
    assert stats["executor"].eval_steps == report["env_steps"]["evaluation"] > 0
    wall = report["wall_s"]
    assert all(r.seconds >= 0 for r in history.runs) and sum(r.seconds for r in history.runs) <= wall + 1.0


def test_edge_counts_follow_the_run_and_are_drawn(run):
    out, _ = run
    graph, history = read_run(out)
    counts = history.edge_counts()
    drawn = {(e.source, e.target) for e in graph.get_graph(xray=1).edges}
    assert set(counts) <= drawn, set(counts) - drawn
    path = history.path()
    assert path[0] == "__start__" and path[-1] == "__end__" and sum(counts.values()) == len(path) - 1
    for node, s in history.node_stats().items():  # each visit is entered once and left once
        assert sum(n for (a, b), n in counts.items() if b == node) == s.visits, node
        assert sum(n for (a, b), n in counts.items() if a == node) == s.visits, node
    plan = json.loads((out / RUN_ID / "report.json").read_text())["plan"]
    assert counts[("subtask", "slow")] == len(plan)  # three subtasks, none reused in a fresh folder
    # the drawing written at the end of the run carries these counts, in Mermaid and in the dot source
    mmd = (out / RUN_ID / "graph_run.mmd").read_text()
    dot = (out / RUN_ID / "graph_run.dot").read_text()
    assert f"&nbsp;{ROUTE_LABELS['subtask']['slow']} ×{len(plan)}&nbsp;" in mmd
    assert f'"subtask" -> "slow" [label="{ROUTE_LABELS["subtask"]["slow"]} ×{len(plan)}"' in dot
    assert f'"slow" -> "planner" [label="{ROUTE_LABELS["slow"]["planner"]} ×0"' in dot  # never taken: faint
    tools = history.node_stats()["attempt:tools"]
    assert re.search(rf'"attempt:tools" \[label="tools\\n{tools.visits}× · [^"]* · [\d,.k]+ steps"', dot), dot
    # collapsed: each stay in the attempt is one visit of its box
    assert history.collapsed().node_stats()["attempt"].visits == counts[("slow", "attempt:__start__")] == len(plan)


def test_draw_cli_draws_a_run(run, tmp_path):
    out, _ = run
    assert main(["--run", RUN_ID, "--out-dir", str(out), "--out", str(tmp_path / "m"), "--matplotlib",
                 "--collapse", "--no-plugins"]) == 0
    mmd = (tmp_path / "m" / "graph_run.mmd").read_text()
    _, collapsed = read_run(out, collapse=True)
    attempts = collapsed.node_stats()["attempt"].visits
    assert f"&nbsp;{ROUTE_LABELS['slow']['attempt']} ×{attempts}&nbsp;" in mmd
    assert (tmp_path / "m" / "graph_run.png").read_bytes()[:8] == PNG_MAGIC
    assert (tmp_path / "m" / "timeline.png").read_bytes()[:8] == PNG_MAGIC
    assert main(["--run", "no-such-run", "--out-dir", str(out), "--out", str(tmp_path / "x")]) == 1


def test_timeline_has_a_row_per_subtask(run):
    out, _ = run
    _, history = read_run(out)
    rows = timeline_rows(history.values)
    report = json.loads((out / RUN_ID / "report.json").read_text())
    assert [r.subtask for r in rows] == report["plan"]
    slots = [s for r in rows for s in r.slots]
    assert len(slots) == len(history.values["results"])
    assert sorted(s.index for s in slots) == list(range(len(slots)))
    assert sum(s.env_steps for s in slots) == report["env_steps"]["spent"]
    for r in rows:
        assert r.slots and all(s.subtask == r.subtask for s in r.slots)
        assert r.outcome.startswith("skill: code"), r.outcome


# ---- the timeline's pieces, on logs written by hand -----------------------------------------------
def test_timeline_rows_show_moves_reuse_and_failures(tmp_path):
    code = {"subtask": "collect_wood", "sub_action": "chop", "kind": "code", "success_rate": 0.5, "steps": 40}
    rl = {"subtask": "collect_wood", "sub_action": "chop_policy", "kind": "rl", "success_rate": 0.95, "steps": 5000}
    stone = {"subtask": "collect_stone", "sub_action": "mine", "kind": "code", "success_rate": 0.1, "steps": 90}
    values = {
        "plan": [{"name": "place_table"}, {"name": "collect_wood"}, {"name": "collect_stone"}],
        "results": [code, rl, stone],
        "events": [{"type": "plan", "subtasks": ["place_table", "collect_wood", "collect_stone"]},
                   {"type": "reuse", "subtask": "place_table", "kind": "code", "success_rate": 1.0},
                   {"type": "measure", **code, "verdict": "move"},
                   {"type": "move", "subtask": "collect_wood", "sub_action": "chop", "from": "code", "to": "rl",
                    "forced": True},
                   {"type": "measure", **rl, "verdict": "pass"},
                   {"type": "measure", **stone, "verdict": "fail"},
                   {"type": "subtask_failed", "subtask": "collect_stone"}],
        "skills": {"place_table": {"kind": "code", "success_rate": 1.0, "passing": True, "reused": True},
                   "collect_wood": {"kind": "rl", "success_rate": 0.95, "passing": True}},
    }
    rows = timeline_rows(values)
    assert [r.subtask for r in rows] == ["place_table", "collect_wood", "collect_stone"]
    table, wood, stone_row = rows
    assert [s.kind for s in table.slots] == ["reuse"] and table.outcome == "reused: code 100%"
    assert [(s.index, s.kind, s.verdict, s.env_steps) for s in wood.slots] == [(1, "code", "move", 40),
                                                                              (2, "rl", "pass", 5000)]
    assert [(m.source, m.target, m.after, m.forced) for m in wood.moves] == [("code", "rl", 1, True)]
    assert wood.outcome == "skill: rl 95%" and stone_row.outcome == "failed: re-plan"
    draw_timeline(rows, tmp_path / "t.png", "a title", values["skills"])
    assert (tmp_path / "t.png").read_bytes()[:8] == PNG_MAGIC


# ---- the report and the run's safety ---------------------------------------------------------------
def test_report_lists_the_pictures_and_videos_present(tmp_path):
    import graph.video

    assert VIDEO_DIR == graph.video.VIDEO_DIR
    (tmp_path / "timeline.png").write_bytes(PNG_MAGIC)
    (tmp_path / VIDEO_DIR).mkdir()
    (tmp_path / VIDEO_DIR / "b_plain.gif").write_bytes(b"GIF89a")
    (tmp_path / VIDEO_DIR / "a_chain.gif").write_bytes(b"GIF89a")
    (tmp_path / VIDEO_DIR / "a_chain.json").write_text(json.dumps({"title": "the final chain", "outcome": "died",
                                                                   "episode_steps": 1234, "seed": 1000001}))
    found = run_pictures(tmp_path)
    assert [p for p, _, _ in found] == ["timeline.png", f"{VIDEO_DIR}/a_chain.gif", f"{VIDEO_DIR}/b_plain.gif"]
    assert found[1][1] == "the final chain (died, 1,234 steps, seed 1000001)" and found[2][1] == "b plain"
    report = {"run_id": "r", "task_text": "t", "task": "t", "env": "crafter", "model": "expert", "status": "finished",
              "stop_reason": None, "env_steps": {"spent": 0, "budget": 1, "evaluation": 0}, "wall_s": 1.0,
              "evaluation": None, "subtasks": [], "moves": [], "usage": {},
              "skills": {"library": "x", "skills": []}}
    md = render_markdown(report, found)
    assert "## Pictures" in md
    assert f"![the final chain (died, 1,234 steps, seed 1000001)]({VIDEO_DIR}/a_chain.gif)" in md
    assert "](graph_run.png)" not in md  # only what is there
    assert "## Pictures" not in render_markdown(report)


def test_a_drawing_that_fails_costs_one_warning(monkeypatch, capsys):
    import graph.pictures
    import graph.video
    from graph.run import _write_pictures_and_videos
    from nodes.settings import RunSettings

    def broken(*args, **kwargs):
        raise RuntimeError("no layout\nsecond line")

    monkeypatch.setattr(graph.pictures, "write_run_pictures", broken)
    monkeypatch.setattr(graph.video, "write_run_videos", lambda *args, **kwargs: [])  # pictures only
    _write_pictures_and_videos(object(), {}, RunSettings(task="collect_wood", run_id="x"), {})
    err = capsys.readouterr().err
    assert err == "warning: no pictures of the run: RuntimeError: no layout\n"
