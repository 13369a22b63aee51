"""Pictures of the graph: Mermaid text, Graphviz dot source, and PNGs, with or without a run drawn over it.

`Overlay` is what a run adds to the drawing: a note under each node (visits, time, env steps) and the
count of traversals on each edge (`graph.run_history`). Without one, the drawing is the plain graph,
every conditional edge labelled with when it is taken (`graph.builder.ROUTE_LABELS`).

The PNG comes from Graphviz through pygraphviz (the `draw` extra) when it is installed, otherwise from
a layered matplotlib drawing of the same nodes and edges (conditional edges dashed). Nothing here needs
a network: LangGraph's own `draw_mermaid_png()` calls a web service and is not used.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables.graph import Edge, Graph, Node

START, END = "__start__", "__end__"
FILL, LINE, FAINT = "#f2f0ff", "#6a5acd", "#b8b8b8"
CLUSTER_FILL, CLUSTER_LINE = "#fbfaff", "#bfb6fc"
EDGE, EDGE_LABEL = "#555555", "#333333"


@dataclass
class Overlay:
    """A run drawn over the graph: `notes` (node id -> a line under its name) and `edges` ((source,
    target) -> traversals). An edge the run never took is drawn faint."""

    title: str = ""
    notes: dict[str, str] = field(default_factory=dict)
    edges: dict[tuple[str, str], int] = field(default_factory=dict)
    visited: set[str] = field(default_factory=set)


# ---- what each node and edge says ----------------------------------------------------------------
def short_name(node_id: str) -> str:
    """The name drawn for a node: the last part of its id, start and end without underscores."""
    name = node_id.split(":")[-1]
    return name.strip("_") if name in (START, END) else name


def edge_text(edge: Edge, overlay: Overlay | None) -> str:
    """An edge's label: when it is taken, and with a run drawn over it, how often it was."""
    label = str(edge.data) if edge.data is not None else ""
    if overlay is None:
        return label
    count = overlay.edges.get((edge.source, edge.target), 0)
    return f"{label} ×{count}" if label else f"×{count}"


def _taken(edge: Edge, overlay: Overlay | None) -> bool:
    return overlay is None or overlay.edges.get((edge.source, edge.target), 0) > 0


def _seen(node_id: str, overlay: Overlay | None) -> bool:
    return overlay is None or node_id in overlay.visited or node_id in (START, END)


def _cluster(node_id: str) -> str:
    """The subgraph a node is drawn inside ('' for the outer graph)."""
    return node_id.rsplit(":", 1)[0] if ":" in node_id else ""


def _is_inner_start(node_id: str) -> bool:
    return ":" in node_id and node_id.endswith(":" + START)


# ---- Mermaid ---------------------------------------------------------------------------------------
def mermaid_text(graph: Graph, overlay: Overlay | None = None) -> str:
    """Mermaid flowchart text; with an overlay, the nodes carry their notes and the edges their counts."""
    if overlay is None:
        return graph.draw_mermaid()
    nodes = {}
    for key, node in graph.nodes.items():
        note = overlay.notes.get(key, "").replace("<", "&lt;")  # '<0.1 s' is text, not a tag
        name = node.name.split(":")[-1]
        nodes[key] = Node(id=node.id, name=f"{name}<br/><small>{note}</small>" if note else name,
                          data=node.data, metadata=node.metadata)
    edges = [Edge(e.source, e.target, edge_text(e, overlay) or None, e.conditional) for e in graph.edges]
    text = Graph(nodes=nodes, edges=edges).draw_mermaid()
    # the title as a comment inside the flowchart (the front matter must stay first)
    return text.replace("graph TD;\n", f"graph TD;\n\t%% {overlay.title}\n", 1) if overlay.title else text


# ---- Graphviz --------------------------------------------------------------------------------------
def _q(text: str) -> str:
    """A double-quoted dot string; a newline becomes a centred line break."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot_source(graph: Graph, overlay: Overlay | None = None) -> str:
    """Graphviz dot source: the subgraph's nodes in a cluster, conditional edges dashed and labelled."""
    lines = ["digraph rlgpt {",
             '  graph [rankdir=TB, fontname="Helvetica", fontsize=12, nodesep=0.45, ranksep=0.4, newrank=true'
             + (f", label={_q(overlay.title)}, labelloc=t" if overlay and overlay.title else "") + "];",
             f'  node [shape=box, style="rounded,filled", fillcolor="{FILL}", color="{LINE}", fontname="Helvetica",'
             " fontsize=11];",
             f'  edge [fontname="Helvetica", fontsize=9, color="{EDGE}", fontcolor="{EDGE_LABEL}"];']
    clusters: dict[str, list[str]] = {}
    for key in graph.nodes:
        clusters.setdefault(_cluster(key), []).append(key)

    depth = layers(list(graph.nodes), list(graph.edges))
    per_layer = Counter(depth.values())
    spine = {key: per_layer[depth[key]] == 1 for key in graph.nodes}

    def node_line(key: str, indent: str) -> str:
        if _is_inner_start(key):
            return f'{indent}{_q(key)} [shape=point, width=0.12, color="{LINE}", label="", group="spine"];'
        attrs = {"label": short_name(key)}
        if spine.get(key):
            attrs["group"] = "spine"  # the nodes alone in their layer, in one straight column
        if overlay is not None and overlay.notes.get(key):
            attrs["label"] += "\n" + overlay.notes[key]
        if key in (START, END):
            attrs.update(shape="oval", fillcolor="white", color=CLUSTER_LINE)
        if not _seen(key, overlay):
            attrs.update(color=FAINT, fontcolor="#888888", fillcolor="#f7f7f7")
        return f"{indent}{_q(key)} [" + ", ".join(f"{k}={_q(v)}" for k, v in attrs.items()) + "];"

    for key in clusters.get("", []):
        lines.append(node_line(key, "  "))
    for name, members in clusters.items():
        if not name:
            continue
        lines.append(f"  subgraph {_q('cluster_' + name)} {{")
        lines.append(f'    label={_q(name)}; style="rounded,filled"; fillcolor="{CLUSTER_FILL}"; '
                     f'color="{CLUSTER_LINE}"; fontcolor="{LINE}";')
        lines += [node_line(key, "    ") for key in members]
        lines.append("  }")
    counts = [n for n in (overlay.edges.values() if overlay else []) if n > 0]
    most = max(counts, default=1)
    for e in graph.edges:
        attrs = {}
        label = edge_text(e, overlay)
        if label:
            attrs["label"] = label
        if e.conditional:
            attrs["style"] = "dashed"
        if depth[e.target] <= depth[e.source] and e.source != e.target:
            attrs["constraint"] = "false"  # a loop's way back: the ranks follow the forward flow
        elif spine.get(e.source) and spine.get(e.target) and depth[e.target] == depth[e.source] + 1:
            attrs["weight"] = "8"  # the main line straight down
        if overlay is not None:
            n = overlay.edges.get((e.source, e.target), 0)
            if n:
                attrs["penwidth"] = f"{1 + 2.5 * math.log1p(n) / math.log1p(most):.2f}"
                attrs["color"] = LINE
            else:
                attrs.update(color=FAINT, fontcolor="#999999")
        tail = " [" + ", ".join(f"{k}={_q(v)}" for k, v in attrs.items()) + "]" if attrs else ""
        lines.append(f"  {_q(e.source)} -> {_q(e.target)}{tail};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def pygraphviz_available() -> bool:
    try:
        import pygraphviz  # noqa: F401
    except ImportError:
        return False
    return True


def render_dot(source: str, path: Path) -> None:
    """Lay out and draw dot source as a PNG with Graphviz (pygraphviz)."""
    import pygraphviz

    pygraphviz.AGraph(string=source).draw(str(path), format="png", prog="dot", args="-Gdpi=110")


# ---- matplotlib ------------------------------------------------------------------------------------
def layers(nodes: list[str], edges: list[Any]) -> dict[str, int]:
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

    for root in ([START] if START in succ else []) + nodes:
        if root not in state:
            dfs(root)
    depth = {n: 0 for n in nodes}
    for _ in nodes:  # relax edges |V| times: longest path in the remaining DAG
        for e in edges:
            if (e.source, e.target) not in back and depth.get(e.target, 0) < depth.get(e.source, 0) + 1:
                depth[e.target] = depth[e.source] + 1
    return depth


Y_GAP, X_GAP = 1.0, 2.5     # inches between rows and between the nodes of a row (1 data unit = 1 inch)
LANE_GAP = 0.42             # inches between the vertical lanes of the long edges
WRAP = 20                   # characters per line of an edge label beside a short edge


def _positions(nodes: list[str], edges: list[Any], row_gap: float) -> dict[str, tuple[float, float]]:
    """(x, y) of each node: one row per layer, centred, a row's nodes ordered by the mean position of
    what leads to them (fewer crossings)."""
    depth = layers(nodes, edges)
    rows: dict[int, list[str]] = {}
    for n in nodes:
        rows.setdefault(depth[n], []).append(n)
    pos: dict[str, tuple[float, float]] = {}
    for d in sorted(rows):
        members = rows[d]

        def pull(n: str) -> float:
            xs = [pos[e.source][0] for e in edges if e.target == n and e.source in pos]
            return sum(xs) / len(xs) if xs else 0.0

        members.sort(key=pull)
        for i, n in enumerate(members):
            pos[n] = ((i - (len(members) - 1) / 2) * X_GAP, -d * row_gap)
    return pos


def _clip(p: tuple[float, float], q: tuple[float, float], half: tuple[float, float]) -> tuple[float, float]:
    """Where the segment from box centre `p` towards `q` leaves the box (half width, half height)."""
    dx, dy = q[0] - p[0], q[1] - p[1]
    t = min(half[0] / abs(dx) if dx else math.inf, half[1] / abs(dy) if dy else math.inf, 1.0)
    return p[0] + t * dx, p[1] + t * dy


def _lanes(spans: list[tuple[Any, float, float]]) -> dict[Any, int]:
    """Lane index per edge so that edges whose vertical ranges overlap get different lanes (shortest
    span nearest the nodes)."""
    out: dict[Any, int] = {}
    taken: list[list[tuple[float, float]]] = []
    for key, lo, hi in sorted(spans, key=lambda s: s[2] - s[1]):
        k = 0
        while k < len(taken) and any(lo <= b + 1e-9 and a <= hi + 1e-9 for a, b in taken[k]):
            k += 1
        if k == len(taken):
            taken.append([])
        taken[k].append((lo, hi))
        out[key] = k
    return out


def draw_png_matplotlib(graph: Graph, path: Path, overlay: Overlay | None = None) -> dict[str, list[str]]:
    """Draw a `langchain_core.runnables.graph.Graph` with matplotlib: boxes in layers, the subgraph's
    nodes on a tinted band, conditional edges dashed. Edges between neighbouring rows are short arcs
    labelled at their middle; longer ones run in vertical lanes beside the nodes (forward on the left,
    back up a loop on the right), labelled along the lane. Returns the texts drawn: {"nodes": [...],
    "edges": [...]}, each edge label with its line breaks taken out."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path as MPath

    nodes = list(graph.nodes)
    edges = list(graph.edges)
    node_font, edge_font = (10, 7.5) if overlay is None else (9, 7.5)
    row_gap = Y_GAP if overlay is None else 1.25
    pos = _positions(nodes, edges, row_gap)

    def label_of(n: str) -> str:
        text = short_name(n)
        if overlay is not None and overlay.notes.get(n):
            text += "\n" + overlay.notes[n]
        return text

    # measure every text once (in inches, which are data units here)
    scratch = plt.figure()
    renderer = scratch.canvas.get_renderer()  # type: ignore[attr-defined]

    def size(text: str, font: float) -> tuple[float, float]:
        t = scratch.text(0, 0, text, fontsize=font, linespacing=1.3)
        box = t.get_window_extent(renderer)
        t.remove()
        return box.width / scratch.dpi, box.height / scratch.dpi

    half: dict[str, tuple[float, float]] = {}
    for n in nodes:
        if _is_inner_start(n):
            half[n] = (0.05, 0.05)
            continue
        w, h = size(label_of(n), node_font)
        pad = 0.45 * node_font / 72
        half[n] = (w / 2 + pad, h / 2 + pad)
    plt.close(scratch)

    def extent(n: str) -> tuple[float, float]:
        return pos[n][0] - half[n][0], pos[n][0] + half[n][0]

    # which edges run in lanes, and on which side
    spans: dict[str, list[tuple[Any, float, float]]] = {"left": [], "right": []}
    kinds: dict[int, str] = {}
    for i, e in enumerate(edges):
        (x0, y0), (x1, y1) = pos[e.source], pos[e.target]
        rows_apart = round(abs(y1 - y0) / row_gap)
        if e.source == e.target:
            kinds[i] = "self"
        elif rows_apart <= 1:
            kinds[i] = "short"
        elif y1 < y0:  # forward over several rows: straight when no node is in the way
            between = [n for n in nodes if y1 < pos[n][1] < y0]
            blocked = any(abs(x0 + (x1 - x0) * (pos[n][1] - y0) / (y1 - y0) - pos[n][0]) < half[n][0] + 0.15
                          for n in between)
            kinds[i] = "left" if blocked else "short"
        else:
            kinds[i] = "right"
        if kinds[i] in spans:
            spans[kinds[i]].append((i, min(y0, y1), max(y0, y1)))
    lanes = {side: _lanes(items) for side, items in spans.items()}

    def reach(lo: float, hi: float, side: str, bands: bool = True) -> float:
        """How far the nodes (with their self loops) and the subgraph bands between two heights reach
        out on one side."""
        xs = []
        for n in nodes:
            if lo - 1e-9 <= pos[n][1] <= hi + 1e-9:
                left, right = extent(n)
                if side == "right" and any(e.source == n == e.target for e in edges):
                    right += 0.5 + size(edge_text(next(e for e in edges if e.source == n == e.target), overlay),
                                        edge_font)[0]
                xs.append(right if side == "right" else left)
        for bx0, by0, bx1, by1 in (band.values() if bands else []):
            if by0 <= hi and lo <= by1:
                xs.append(bx1 if side == "right" else bx0)
        return (max(xs) if side == "right" else min(xs)) if xs else 0.0

    band: dict[str, tuple[float, float, float, float]] = {}  # subgraph -> (x0, y0, x1, y1) of its tinted band
    for name in sorted({_cluster(n) for n in nodes} - {""}):
        members = [n for n in nodes if _cluster(n) == name]
        y_top = max(pos[n][1] + half[n][1] for n in members) + 0.35
        y_bot = min(pos[n][1] - half[n][1] for n in members) - 0.2
        x0 = min(reach(pos[n][1], pos[n][1], "left", bands=False) for n in members) - 0.25
        x1 = max(reach(pos[n][1], pos[n][1], "right", bands=False) for n in members) + 0.25
        band[name] = (x0, y_bot, x1, y_top)

    lane_x: dict[int, float] = {}
    for side, items in spans.items():
        sign = 1 if side == "right" else -1
        for i, lo, hi in items:
            lane_x[i] = reach(lo, hi, side) + sign * (0.35 + LANE_GAP * lanes[side][i])

    # the figure: 1 data unit = 1 inch on both axes
    xs = [x for n in nodes for x in extent(n)] + list(lane_x.values())
    for i, e in enumerate(edges):
        if kinds[i] == "self":
            xs.append(reach(pos[e.source][1], pos[e.source][1], "right"))
    ys = [y for _, y in pos.values()]
    title_h = 0.5 if overlay is not None and overlay.title else 0.0
    x_lo, x_hi = min(xs) - 0.45, max(xs) + 0.45
    y_lo, y_hi = min(ys) - 0.55, max(ys) + 0.55 + title_h
    fig = plt.figure(figsize=(x_hi - x_lo, y_hi - y_lo))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.axis("off")

    for name, (bx0, by0, bx1, by1) in band.items():  # the subgraph on a tinted band
        ax.add_patch(FancyBboxPatch((bx0, by0), bx1 - bx0, by1 - by0, boxstyle="round,pad=0.02,rounding_size=0.15",
                                    fc=CLUSTER_FILL, ec=CLUSTER_LINE, lw=1.0, zorder=0))
        ax.text(bx0 + 0.12, by1 - 0.08, name, ha="left", va="top", fontsize=9, color=LINE, zorder=1)

    counts = [n for n in (overlay.edges.values() if overlay else []) if n > 0]
    most = max(counts, default=1)
    pairs = {(e.source, e.target) for e in edges}
    drawn: dict[str, list[str]] = {"nodes": [], "edges": []}
    for i, e in enumerate(edges):
        taken = _taken(e, overlay)
        times = overlay.edges.get((e.source, e.target), 0) if overlay else 0
        style: dict[str, Any] = dict(arrowstyle="-|>", mutation_scale=12, linestyle="--" if e.conditional else "-",
                                     color=(LINE if overlay is not None else EDGE) if taken else FAINT,
                                     lw=1.0 + (2.2 * math.log1p(times) / math.log1p(most) if times else 0.0),
                                     zorder=2)
        (x0, y0), (x1, y1) = pos[e.source], pos[e.target]
        text, rotation, ha = edge_text(e, overlay), 0.0, "center"
        if kinds[i] == "self":
            hx, hy = half[e.source]
            loop = MPath([(x0 + hx, y0 + 0.06), (x0 + hx + 0.5, y0 + 0.4), (x0 + hx + 0.5, y0 - 0.4),
                          (x0 + hx, y0 - 0.06)], [MPath.MOVETO, MPath.CURVE4, MPath.CURVE4, MPath.CURVE4])
            ax.add_patch(FancyArrowPatch(path=loop, **style))
            at, ha = (x0 + hx + 0.45, y0), "left"
        elif kinds[i] == "short":
            rad = 0.0
            if (e.target, e.source) in pairs:  # a pair of opposite edges: each bends to its own side, the
                mid_x = (x0 + x1) / 2           # downward one away from the middle of the drawing
                rad = 0.25 if mid_x == 0 or (min(y0, y1) - max(y0, y1)) * mid_x > 0 else -0.25
            elif y1 >= y0:
                rad = 0.3
            a = _clip((x0, y0), (x1, y1), half[e.source])
            b = _clip((x1, y1), (x0, y0), half[e.target])
            ax.add_patch(FancyArrowPatch(a, b, connectionstyle=f"arc3,rad={rad}", shrinkA=1, shrinkB=1, **style))
            dx, dy = b[0] - a[0], b[1] - a[1]
            at = ((a[0] + b[0]) / 2 + 0.5 * rad * dy, (a[1] + b[1]) / 2 - 0.5 * rad * dx)
            if rad:  # beside a bent edge, on the outside of its bend
                length = math.hypot(dx, dy) or 1.0
                nx, ny = math.copysign(1, rad) * dy / length, -math.copysign(1, rad) * dx / length
                at = (at[0] + 0.1 * nx, at[1] + 0.1 * ny)
                ha = "left" if nx > 0.3 else "right" if nx < -0.3 else "center"
            text = "\n".join(textwrap.wrap(text, WRAP, break_on_hyphens=False)) if text else text
        else:  # out of the side of one box, along its lane, into the side of the other
            sign = 1 if kinds[i] == "right" else -1
            lane = lane_x[i]
            sx, tx = x0 + sign * half[e.source][0], x1 + sign * half[e.target][0]
            r = min(0.18, abs(y1 - y0) / 2)
            down = -1 if y1 < y0 else 1
            verts = [(sx, y0), (lane - sign * r, y0), (lane, y0), (lane, y0 + down * r), (lane, y1 - down * r),
                     (lane, y1), (lane - sign * r, y1), (tx, y1)]
            codes = [MPath.MOVETO, MPath.LINETO, MPath.CURVE3, MPath.CURVE3, MPath.LINETO, MPath.CURVE3,
                     MPath.CURVE3, MPath.LINETO]
            ax.add_patch(FancyArrowPatch(path=MPath(verts, codes), **style))
            at, rotation = (lane, (y0 + y1) / 2), 90.0
        if text:
            drawn["edges"].append(" ".join(text.split()))
            ax.text(at[0], at[1], text, fontsize=edge_font, ha=ha, va="center", rotation=rotation, zorder=4,
                    multialignment="center" if ha == "center" else ha,
                    color=EDGE_LABEL if taken else "#999999", linespacing=1.15,
                    bbox=dict(boxstyle="round,pad=0.12", fc="white", ec="none", alpha=0.92))
    for n, (x, y) in pos.items():
        if _is_inner_start(n):
            ax.plot([x], [y], marker="o", markersize=6, color=LINE, zorder=3)
            continue
        special = n in (START, END)
        seen = _seen(n, overlay)
        drawn["nodes"].append(label_of(n))
        ax.text(x, y, label_of(n), ha="center", va="center", fontsize=node_font, zorder=5,
                color="black" if seen else "#888888", linespacing=1.3,
                bbox=dict(boxstyle="round,pad=0.45", fc="#ffffff" if special else (FILL if seen else "#f7f7f7"),
                          ec=CLUSTER_LINE if special else (LINE if seen else FAINT)))
    if overlay is not None and overlay.title:
        ax.text((x_lo + x_hi) / 2, y_hi - 0.3, overlay.title, ha="center", va="center", fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


# ---- one drawing, written -------------------------------------------------------------------------
def write_graph_pictures(graph: Graph, out_dir: Path, stem: str = "graph", overlay: Overlay | None = None,
                         prefer_graphviz: bool = True) -> tuple[Path, Path, str]:
    """Write STEM.mmd and STEM.png (with STEM.dot beside a Graphviz PNG) into `out_dir`; returns
    (mmd, png, renderer name)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    mmd = out_dir / f"{stem}.mmd"
    mmd.write_text(mermaid_text(graph, overlay), encoding="utf-8")
    png = out_dir / f"{stem}.png"
    if prefer_graphviz and pygraphviz_available():
        source = dot_source(graph, overlay)
        (out_dir / f"{stem}.dot").write_text(source, encoding="utf-8")
        render_dot(source, png)
        return mmd, png, "graphviz"
    draw_png_matplotlib(graph, png, overlay)
    return mmd, png, "matplotlib"


def overlay_notes(stats: Mapping[str, Any]) -> dict[str, str]:
    """The line under each visited node: visits, time, env steps (and held-out evaluation steps)."""
    notes = {}
    for node, s in stats.items():
        parts = [f"{s.visits}×", _seconds(s.seconds)]
        if s.env_steps:
            parts.append(f"{_count(s.env_steps)} steps")
        if s.eval_steps:
            parts.append(f"{_count(s.eval_steps)} eval steps")
        notes[node] = " · ".join(parts)
    return notes


def _seconds(s: float) -> str:
    if s < 0.1:
        return "<0.1 s"
    if s < 10:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s:.0f} s"
    return f"{s / 3600:.1f} h"


def _count(n: int) -> str:
    if n < 10_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1e6:.1f}M"


# ---- a run drawn over the graph, and its timeline ---------------------------------------------------
RUN_GRAPH_STEM = "graph_run"
TIMELINE_FILE = "timeline.png"


def run_overlay(history: Any, title: str = "") -> Overlay:
    """What a `graph.run_history.RunHistory` adds to the drawing."""
    stats = history.node_stats()
    return Overlay(title=title, notes=overlay_notes(stats), edges=dict(history.edge_counts()),
                   visited=set(stats))


def run_title(history: Any) -> str:
    v = history.values
    spent, budget = int(v.get("env_steps_spent") or 0), int(v.get("budget_steps") or 0)
    text = f"run {history.run_id}: {v.get('task_text') or v.get('task') or ''}, {spent:,} of {budget:,} env steps"
    ev = v.get("evaluation") or {}
    if isinstance(ev.get("crafter_score"), (int, float)):
        text += f", held-out Crafter score {ev['crafter_score']:.1f}"
    elif isinstance(ev.get("success_rate"), (int, float)):
        text += f", held-out success {ev['success_rate']:.0%}"
    return text if history.finished else text + " (stopped)"


def write_run_pictures(compiled: Any, config: dict, out_dir: Path, run_dir: Path | None = None, expand: bool = True,
                       prefer_graphviz: bool = True) -> list[Path]:
    """The run under `config` drawn over the graph (graph_run.mmd and .png) and its timeline
    (timeline.png), written into `out_dir`; `run_dir` holds its sessions.json. Returns the files."""
    from graph.run_history import read_history
    from graph.timeline import write_timeline

    history = read_history(compiled, config, run_dir or out_dir)
    title = run_title(history)
    drawn = history if expand else history.collapsed()
    mmd, png, _ = write_graph_pictures(compiled.get_graph(xray=1 if expand else 0), out_dir, RUN_GRAPH_STEM,
                                       run_overlay(drawn, title), prefer_graphviz)
    timeline = out_dir / TIMELINE_FILE
    write_timeline(history.values, timeline, title)
    return [mmd, png, timeline]
