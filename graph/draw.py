"""`python -m graph.draw [--out DIR]`: write the RL-GPT graph as Mermaid text and a PNG, offline.
`python -m graph.draw --run RUN_ID [--out-dir runs]`: draw a run over the graph (each node's visits,
time and env steps, each edge's traversals, from the run's checkpoints) and the run's timeline.

Every conditional edge is labelled with when it is taken. The PNG comes from Graphviz through
pygraphviz (the `draw` extra) when it is installed, otherwise from matplotlib; `graph.pictures` draws,
`graph.run_history` and `graph.timeline` read the run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from graph.pictures import draw_png_matplotlib, pygraphviz_available, write_graph_pictures

__all__ = ["FALLBACK_NOTE", "build_default_graph", "draw_png_matplotlib", "main", "write_drawings"]

FALLBACK_NOTE = ("pygraphviz is not installed, so the PNG was drawn with matplotlib (simpler layout). "
                 "For a Graphviz drawing: apt-get install -y graphviz libgraphviz-dev && pip install pygraphviz")


def build_default_graph(with_plugins: bool = True, checkpointer: Any = None) -> Any:
    """The compiled graph for default settings and the offline expert."""
    from graph.builder import build_graph
    from graph.plugins import load_plugins

    return build_graph(checkpointer=checkpointer, plugins=load_plugins() if with_plugins else None)


def write_drawings(compiled: Any, out_dir: Path, prefer_graphviz: bool = True,
                   expand: bool = True) -> tuple[Path, Path, str]:
    """Write graph.mmd and graph.png (and graph.dot with Graphviz) into `out_dir`; returns (mmd, png,
    renderer name). `expand`: draw the attempt subgraph's own nodes (fast, tools, measure, critic) instead of
    one box."""
    return write_graph_pictures(compiled.get_graph(xray=1 if expand else 0), out_dir, "graph",
                                prefer_graphviz=prefer_graphviz)


def _draw_run(args: argparse.Namespace) -> int:
    import sqlite3
    from contextlib import closing

    from langgraph.checkpoint.sqlite import SqliteSaver

    from graph.pictures import write_run_pictures

    db = args.out_dir / "checkpoints.sqlite"
    if not db.is_file():
        print(f"error: no checkpoints at {db}; give the runs folder with --out-dir", file=sys.stderr)
        return 1
    run_dir = args.out_dir / args.run
    with closing(sqlite3.connect(str(db), check_same_thread=False)) as conn:
        compiled = build_default_graph(with_plugins=not args.no_plugins, checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": args.run}}
        if not compiled.get_state(config).values:
            print(f"error: no run '{args.run}' in {db}", file=sys.stderr)
            return 1
        files = write_run_pictures(compiled, config, args.out or run_dir, run_dir, expand=not args.collapse,
                                   prefer_graphviz=not args.matplotlib)
    for path in files:
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m graph.draw",
        description="Write the RL-GPT LangGraph as Mermaid text (graph.mmd) and a PNG (graph.png), offline; "
                    "with --run, a run drawn over the graph (graph_run.mmd, graph_run.png) and its timeline "
                    "(timeline.png).")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: docs; with --run, the run's folder OUT_DIR/RUN_ID)")
    parser.add_argument("--run", metavar="RUN_ID", help="draw this run over the graph, and its timeline")
    parser.add_argument("--out-dir", type=Path, default=Path("runs"), metavar="DIR",
                        help="with --run: the runs folder holding checkpoints.sqlite (default: runs)")
    parser.add_argument("--no-plugins", action="store_true",
                        help="draw without the nodes added by installed rlgpt.plugins")
    parser.add_argument("--collapse", action="store_true",
                        help="draw the attempt subgraph (fast, tools, measure, critic) as one node")
    parser.add_argument("--matplotlib", action="store_true",
                        help="draw the PNG with matplotlib even when pygraphviz is installed")
    args = parser.parse_args(argv)
    from graph.plugins import PluginError

    try:
        if args.run:
            return _draw_run(args)
        compiled = build_default_graph(with_plugins=not args.no_plugins)
    except PluginError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    mmd, png, how = write_drawings(compiled, args.out or Path("docs"), prefer_graphviz=not args.matplotlib,
                                   expand=not args.collapse)
    print(f"wrote {mmd}")
    print(f"wrote {png} (drawn with {how})")
    if how == "matplotlib" and not args.matplotlib and not pygraphviz_available():
        print(f"note: {FALLBACK_NOTE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
