"""PNG plots of the tables (matplotlib, Agg backend: no display needed)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

from graph.evaluation.tables import Table  # noqa: E402


def _err(rows: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    vals = np.array([r.get(key) if r.get(key) is not None else np.nan for r in rows], dtype=float)
    lo = np.array([r.get(f"{key}_ci_low") if r.get(f"{key}_ci_low") is not None else np.nan for r in rows], float)
    hi = np.array([r.get(f"{key}_ci_high") if r.get(f"{key}_ci_high") is not None else np.nan for r in rows], float)
    # clip: a cached interval from before rl.stats.wilson_interval held its estimate exactly can sit a
    # rounding error inside it (200/200 had an upper bound of 0.9999999999999999)
    return vals, np.clip(np.nan_to_num(np.vstack([vals - lo, hi - vals])), 0.0, None)


def _wrapped(label: str, width: int = 44) -> str:
    """A label on a few lines, whole words kept: a cut label reads as a different name."""
    return textwrap.fill(label, width, break_long_words=False)


def _bars(ax, labels: list[str], vals: np.ndarray, err: np.ndarray, colors: list[str], measured: list[bool],
          value_label: str) -> None:
    """Horizontal bars, the first row on top, every label in full; an interval only where one was measured
    (a published figure carries none, and a zero-width bar would pass it off as exact)."""
    y = np.arange(len(labels))
    ax.barh(y, np.nan_to_num(vals), color=colors)
    shown = np.array(measured, bool) & ~np.isnan(vals)
    if shown.any():
        ax.errorbar(vals[shown], y[shown], xerr=err[:, shown], fmt="none", ecolor="black", capsize=4)
    ax.set_yticks(y, [_wrapped(label) for label in labels], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(value_label)


def plot_table(table: Table, folder: Path) -> Path | None:
    """Draw the table's plot into folder/table.plot; returns its path (None if it has no plot)."""
    if table.plot is None:
        return None
    fig, ax = plt.subplots(figsize=(11, 5))
    rows = table.rows
    if table.key in ("table1_obtain_diamond", "table4_ablations"):
        label_key = "method" if table.key.startswith("table1") else "setting"
        vals, err = _err(rows, "success_rate")
        ours = [r.get("source", "ours") == "ours (Crafter)" or table.key.startswith("table4") for r in rows]
        _bars(ax, [r[label_key] for r in rows], vals, err, ["tab:blue" if o else "tab:gray" for o in ours], ours,
              "success rate")
        ax.set_xlim(0, 1.05)
        if table.key.startswith("table1"):
            ax.set_title("Obtain diamond: ours on Crafter (blue, 95% CI) vs published MineDojo (gray)")
    elif table.key == "table2_tech_tree":
        x = np.arange(len(rows))
        for i, (m, color) in enumerate((("rlgpt", "tab:blue"), ("pure_rl", "tab:orange"), ("pure_code", "tab:green"))):
            vals, err = _err(rows, f"{m}_success_rate")
            ax.bar(x + (i - 1) * 0.25, np.nan_to_num(vals), 0.25, yerr=err, capsize=2, color=color,
                   label={"rlgpt": "RL-GPT (expert)", "pure_rl": "pure RL", "pure_code": "pure code"}[m])
        pub = np.array([r.get("published_rlgpt_minedojo") if r.get("published_rlgpt_minedojo") is not None
                        else np.nan for r in rows], float)
        ax.scatter(x, pub, marker="*", s=80, color="black", zorder=3, label="RL-GPT published (MineDojo)")
        ax.set_xticks(x, [r["task"] for r in rows], rotation=25, ha="right", fontsize=8)
        ax.set_ylabel("success rate")
        ax.legend(fontsize=8)
    elif table.key == "table3_iterations":
        our_rows = [r for r in rows if r.get("outer") is not None]
        published_rows = [r for r in rows if r.get("outer") is None]
        if our_rows:
            vals, err = _err(our_rows, "success_rate")
            it = [r["iteration"] for r in our_rows]
            ax.errorbar(it, vals, yerr=err, marker="o", capsize=4, label="ours, held-out (95% CI)")
            ax.plot(it, [r.get("measured_success") for r in our_rows], "x--",  # type: ignore[arg-type]  # None: a gap
                    label="ours, success seen by the critic")
            for r, v in zip(our_rows, vals):
                ax.annotate(r["kind"], (r["iteration"], 0 if np.isnan(v) else v), textcoords="offset points",
                            xytext=(4, 6), fontsize=7)
        ax.plot([r["iteration"] for r in published_rows], [r["success_rate"] for r in published_rows], "s:",
                color="gray", label="RL-GPT published (MineDojo)")
        ax.set_xlabel("iteration")
        ax.set_ylabel("success rate")
        ax.legend(fontsize=8)
    elif table.key == "table5_crafter_score":
        vals, err = _err(rows, "crafter_score")
        ours = [r["source"] == "ours (Crafter)" for r in rows]
        _bars(ax, [r["agent"] for r in rows], vals, err, ["tab:blue" if o else "tab:gray" for o in ours], ours,
              "Crafter score (%)")
        ax.set_title("Crafter score: ours on Crafter (blue, 95% CI) vs published (gray)")
    elif table.key == "table5_achievements":
        names = [c.key for c in table.columns if c.kind == "rate"]
        x = np.arange(len(rows))
        width = 0.8 / max(len(names), 1)
        for i, name in enumerate(names):
            vals = np.array([r.get(name) or 0.0 for r in rows]) * 100
            ax.bar(x + (i - (len(names) - 1) / 2) * width, np.maximum(vals, 0.01), width, label=name)
        ax.set_yscale("log")
        ax.set_ylim(0.01, 100)
        ax.set_xticks(x, [r["achievement"] for r in rows], rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("success rate (%)")
        ax.legend(fontsize=8)
    else:
        plt.close(fig)
        raise ValueError(f"no plot is defined for table {table.key}")
    if table.key in ("table2_tech_tree", "table3_iterations"):
        ax.set_ylim(0, 1.05)
    ax.set_title(ax.get_title() or table.title, fontsize=10)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / table.plot
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
