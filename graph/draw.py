"""`python -m graph.draw [--out DIR]`: write the RL-GPT graph as Mermaid text and a PNG, offline.

LangGraph's `draw_mermaid_png()` calls a web service, so it is not used. The PNG comes from
Graphviz through pygraphviz (`get_graph().draw_png()`) when pygraphviz is installed, and
otherwise from a small matplotlib drawing of the same nodes and edges (layered top to bottom,
conditional edges dashed), so the command always works without a network.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

FALLBACK_NOTE = ("pygraphviz is not installed, so the PNG was drawn with matplotlib (simpler layout). "
                 "For a Graphviz drawing: apt-get install -y graphviz libgraphviz-dev && pip install pygraphviz")


def build_default_graph(with_plugins: bool = True) -> Any:
    """The compiled graph for default settings and the offline expert (no checkpointer)."""
    from graph.builder import build_graph
    from graph.plugins import load_plugins

    return build_graph(plugins=load_plugins() if with_plugins else None)


def _layers(nodes: list[str], edges: list[Any]) -> dict[str, int]:
    """Row of each node: longest path from __start__ once the loops' back edges are set aside,
    so that a node sits below everything that leads to it (executor below critic)."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        succ.setdefault(e.source, []).append(e.target)
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1 = on the DFS stack, 2 = finished

    def dfs(n: str) -> None:
        state[n] = 1
        for m in succ.get(n, []):
            if state.get(m) == 1:
                back.add((n, m))
            elif m not in state:
                dfs(m)
        state[n] = 2

    for root in (["__start__"] if "__start__" in succ else []) + nodes:
        if root not in state:
            dfs(root)
    depth = {n: 0 for n in nodes}
    for _ in nodes:  # relax edges |V| times: longest path in the remaining DAG
        for e in edges:
            if (e.source, e.target) not in back and depth.get(e.target, 0) < depth.get(e.source, 0) + 1:
                depth[e.target] = depth[e.source] + 1
    return depth


def draw_png_matplotlib(graph: Any, path: Path) -> None:
    """Draw a `langchain_core.runnables.graph.Graph` with matplotlib: boxes, arrows, dashed conditionals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch

    nodes = list(graph.nodes)
    edges = list(graph.edges)
    depth = _layers(nodes, edges)
    rows: dict[int, list[str]] = {}
    for n in nodes:
        rows.setdefault(depth[n], []).append(n)
    width = max(len(r) for r in rows.values())
    pos = {}
    for d, members in rows.items():
        for i, n in enumerate(members):
            pos[n] = ((i + 0.5) * width / len(members), -d)
    fig, ax = plt.subplots(figsize=(2.4 * width + 1.5, 1.3 * len(rows) + 1))
    for e in edges:
        (x0, y0), (x1, y1) = pos[e.source], pos[e.target]
        back = y1 >= y0 and e.source != e.target  # an edge going up or sideways: a loop, bent right
        span = abs(y1 - y0)
        # a forward edge that skips rows bends left, so it does not hide behind the straight chain
        rad = 0.35 if back else (0.15 + 0.04 * span if span > 1 else 0.0)
        arrow = FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=14,
                                connectionstyle=f"arc3,rad={rad}",
                                linestyle="--" if e.conditional else "-", color="#555", shrinkA=18, shrinkB=18)
        ax.add_patch(arrow)
        if e.data:
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, str(e.data), fontsize=7, color="#333")
    for n, (x, y) in pos.items():
        special = n in ("__start__", "__end__")
        ax.text(x, y, n.strip("_") if special else n, ha="center", va="center", fontsize=10,
                bbox=dict(boxstyle="round,pad=0.5", fc="#ffffff" if special else "#f2f0ff",
                          ec="#bfb6fc" if special else "#6a5acd"))
    ax.set_xlim(-0.3, width + 0.3)
    ax.set_ylim(-len(rows) + 0.4, 0.6)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def pygraphviz_available() -> bool:
    try:
        import pygraphviz  # noqa: F401
    except ImportError:
        return False
    return True


def write_drawings(compiled: Any, out_dir: Path, prefer_graphviz: bool = True,
                   expand: bool = True) -> tuple[Path, Path, str]:
    """Write graph.mmd and graph.png into `out_dir`; returns (mmd, png, renderer name). `expand`: draw the
    attempt subgraph's own nodes (fast, tools, critic) instead of one box."""
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = compiled.get_graph(xray=1 if expand else 0)
    mmd = out_dir / "graph.mmd"
    mmd.write_text(graph.draw_mermaid(), encoding="utf-8")
    png = out_dir / "graph.png"
    if prefer_graphviz and pygraphviz_available():
        graph.draw_png(str(png))
        return mmd, png, "graphviz"
    draw_png_matplotlib(graph, png)
    return mmd, png, "matplotlib"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m graph.draw",
        description="Write the RL-GPT LangGraph as Mermaid text (graph.mmd) and a PNG (graph.png), offline.")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="output folder (default: docs)")
    parser.add_argument("--no-plugins", action="store_true",
                        help="draw without the nodes added by installed rlgpt.plugins")
    parser.add_argument("--collapse", action="store_true",
                        help="draw the attempt subgraph (fast, tools, critic) as one node")
    parser.add_argument("--matplotlib", action="store_true",
                        help="draw the PNG with matplotlib even when pygraphviz is installed")
    args = parser.parse_args(argv)
    from graph.plugins import PluginError

    try:
        compiled = build_default_graph(with_plugins=not args.no_plugins)
    except PluginError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    mmd, png, how = write_drawings(compiled, args.out, prefer_graphviz=not args.matplotlib,
                                   expand=not args.collapse)
    print(f"wrote {mmd}")
    print(f"wrote {png} (drawn with {how})")
    if how == "matplotlib" and not args.matplotlib:
        print(f"note: {FALLBACK_NOTE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
