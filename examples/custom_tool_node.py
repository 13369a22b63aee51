"""A plugin that adds a tool and a node to RL-GPT without editing the package.

- Tool `craftable_items`: given an inventory, which Crafter items could be made or placed next
  (from Crafter's own recipe data). It joins the fast agent's tool list.
- Node `critique_digest`, spliced in right after the critic: it turns the critic's latest verdict
  into one line in the run's `events` log (so it shows up in the report) and appends it to
  `critique_digest.log` in the run folder.

Run it (a tiny budget with the offline expert, a few minutes on two cores):

    python examples/custom_tool_node.py              # builds, draws and runs the graph with the plugin
    python examples/custom_tool_node.py --draw-only  # only writes graph.mmd / graph.png with the extra node

To ship the same plugin as a package, point the entry-point group at this module in its
pyproject.toml; importing it registers both pieces:

    [project.entry-points."rlgpt.plugins"]
    critique_digest = "my_package.custom_tool_node"
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from langchain_core.tools import tool

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT))

from graph.plugins import register_node, register_tool  # noqa: E402

DIGEST_LOG = "critique_digest.log"


def _recipes() -> dict:
    import crafter

    return crafter.constants.make, crafter.constants.place  # type: ignore[attr-defined]


@tool
def craftable_items(inventory_json: str) -> str:
    """List the Crafter items that can be made or placed with this inventory (a JSON object of
    item -> count), and what each one still needs nearby (a table, a furnace)."""
    try:
        inventory = json.loads(inventory_json)
        if not isinstance(inventory, dict):
            raise ValueError("not an object")
    except (json.JSONDecodeError, ValueError) as e:
        return f"error: inventory_json must be a JSON object like {{\"wood\": 3}} ({e})"
    make, place = _recipes()
    ready = []
    for kind, recipes in (("make", make), ("place", place)):
        for item, recipe in recipes.items():
            if all(int(inventory.get(k, 0)) >= n for k, n in recipe["uses"].items()):
                near = recipe.get("nearby", [])
                ready.append(f"{kind} {item}" + (f" (near {', '.join(near)})" if near else ""))
    return "; ".join(sorted(ready)) if ready else "nothing yet: collect more resources"


def critique_digest(state: dict) -> dict:
    """One line per critic verdict, into the events log and critique_digest.log."""
    critiques = state.get("critiques") or []
    if not critiques:
        return {}
    c = critiques[-1]
    line = (f"{c.get('subtask', '?')}/{c.get('sub_action', '?')}: {c.get('verdict')} at "
            f"{float(c.get('success_rate', 0.0)):.0%} - {str(c.get('feedback', ''))[:80]}")
    run_dir = _RUN_DIR.get("path")
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(run_dir / DIGEST_LOG, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    return {"events": [{"type": "plugin", "plugin": "critique_digest", "message": line}]}


_RUN_DIR: dict[str, Path] = {}  # set by main(); the node only reads the graph state otherwise

register_tool(craftable_items)
register_node("critique_digest", critique_digest, after="critic",
              description="one line per critic verdict into the events log")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: a temporary folder)")
    parser.add_argument("--draw-only", action="store_true", help="write the graph drawing and stop")
    parser.add_argument("--budget-steps", type=int, default=3000, help="environment-step budget (default 3000)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="rlgpt-plugin-"))

    from graph.draw import build_default_graph, write_drawings

    mmd, png, how = write_drawings(build_default_graph(), out)
    print(f"graph with the plugin node: {mmd}, {png} ({how})")
    if "critique_digest" not in mmd.read_text():
        print("error: the plugin node is missing from the graph", file=sys.stderr)
        return 1
    if args.draw_only:
        return 0

    from graph import run

    run_id = "plugin-example"
    _RUN_DIR["path"] = out / run_id
    code = run.main(["harvest log", "--out", str(out), "--run-id", run_id, "--budget-steps",
                     str(args.budget_steps), "--max-outer-iters", "1", "--max-inner-iters", "2",
                     "--eval-episodes", "2", "--max-wall-s", "600", "--no-live"])
    digest = _RUN_DIR["path"] / DIGEST_LOG
    if digest.is_file():
        print(f"\n{DIGEST_LOG}:\n{digest.read_text()}")
    return code


if __name__ == "__main__":
    sys.exit(main())
