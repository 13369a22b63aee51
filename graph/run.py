"""`python -m graph.run "obtain diamond"`: run RL-GPT on a task, checkpointed, with live progress.

Every node's result is saved to out_dir/checkpoints.sqlite before the next node starts
(durability="sync"), under the run id as LangGraph thread id, so `--resume RUN_ID` continues a
killed run from its last finished node. At the end the summary table is printed and
report.md / report.json are written into out_dir/RUN_ID/.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from graph.settings import SettingsError, list_run_ids, load_run_settings, make_settings, save_settings
from nodes.models.base import RUN_STOPPING
from nodes.settings import CODE_TEST_EPISODES, VECTOR_MODE_CHOICES, RunSettings
from sandbox.host import MODE_ENV as SANDBOX_MODE_ENV
from sandbox.host import MODES as SANDBOX_MODES

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
RECURSION_LIMIT = 100_000  # the loops are bounded by the settings, not by LangGraph's step cap
EVENTS_FILE = "events.jsonl"
SESSIONS_FILE = "sessions.json"


class RunError(RuntimeError):
    """A problem the user can fix; printed as one clear message."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


# ---- command line ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    d = RunSettings.model_fields
    p = argparse.ArgumentParser(
        prog="python -m graph.run",
        description="Run RL-GPT on a Crafter task: a planner splits the task into subtasks, a slow agent "
                    "decides per sub-action between code and RL, a fast agent writes code or RL configs "
                    "and a critic judges the measured results. Checkpointed after every node.",
        epilog="Examples:\n"
               "  python -m graph.run \"harvest log\"\n"
               "  python -m graph.run \"obtain diamond\" --budget-steps 3000000 --max-wall-s 86400\n"
               "  python -m graph.run --resume collect_wood-20250101-120000-ab12\n"
               "Settings are taken from the defaults, then --config FILE, then the options given.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", nargs="?", help="task name or plain words, e.g. 'obtain diamond', 'harvest log', "
                                           f"'collect_wood' (default: {d['task'].default})")
    p.add_argument("--env", choices=["crafter", "minedojo"], help=f"environment backend (default: {d['env'].default})")
    p.add_argument("--model", help="'expert' or unset: the offline rule-based expert; 'smollm2': SmolLM2-135M on a "
                                   "local llama.cpp server (the llamacpp extra); 'file:DIR': answers written as "
                                   "files by any answerer; 'replay:FILE': a recorded run; any other name: a chat "
                                   "model on an OpenAI-compatible server (OPENAI_API_KEY or OPENAI_BASE_URL)")
    p.add_argument("--record", type=Path, metavar="FILE",
                   help="write every model call (prompt, answer, tokens) to FILE as JSON lines")
    p.add_argument("--replay", type=Path, metavar="FILE",
                   help="answer every model call from a recorded FILE (same as --model replay:FILE)")
    p.add_argument("--budget-steps", type=int, metavar="N",
                   help=f"environment steps the run may spend (default: {d['budget_steps'].default})")
    p.add_argument("--max-outer-iters", type=int, metavar="N",
                   help=f"slow-agent revisions per subtask (default: {d['max_outer_iters'].default})")
    p.add_argument("--max-inner-iters", type=int, metavar="N",
                   help="fast-agent revisions per decomposition: code repairs from the test report, or longer "
                        f"trainings; then code moves to RL (default: {d['max_inner_iters'].default})")
    p.add_argument("--max-wall-s", type=float, metavar="S",
                   help="wall-clock limit in seconds (default: none: the step budget and the model-call limit "
                        "bound a run)")
    p.add_argument("--max-model-calls", type=int, metavar="N",
                   help=f"model calls the run may make (default: {d['max_model_calls'].default})")
    p.add_argument("--train-steps", type=int, metavar="N",
                   help=f"env steps of one PPO training (default: {d['train_steps'].default})")
    p.add_argument("--eval-episodes", type=int, metavar="N",
                   help=f"held-out episodes per success-rate measurement (default: {d['eval_episodes'].default})")
    p.add_argument("--eval-max-steps", type=int, metavar="N",
                   help="primitive steps per held-out episode (default: the task's own step limit)")
    p.add_argument("--test-episodes", type=int, metavar="N",
                   help=f"code-test seeds per measurement (default: min({CODE_TEST_EPISODES}, eval episodes); twice "
                        "that for the plan's last subtask of a one-achievement task, which replays the whole chain)")
    p.add_argument("--test-max-steps", type=int, metavar="N",
                   help="primitive steps per code test (default: the subtask's own step limit)")
    p.add_argument("--target-success", type=float, metavar="P",
                   help=f"success rate that passes an attempt outright (default: {d['target_success'].default})")
    p.add_argument("--max-replans", type=int, metavar="N",
                   help=f"re-plans after a subtask fails (default: {d['max_replans'].default}; past them the task "
                        "itself is learned once with the budget left)")
    p.add_argument("--skill-threshold", type=float, metavar="P",
                   help=f"success rate at which a skill is reused (default: {d['skill_threshold'].default})")
    p.add_argument("--seed", type=int, help=f"training/code-test seed, below 1000000 (default: {d['seed'].default})")
    p.add_argument("--vector-mode", choices=VECTOR_MODE_CHOICES,
                   help="how PPO steps its envs: actors (default: 2 worker processes that act and step, the "
                        "same run on any machine; docs/performance.md), sync (this process) or ray (actors on "
                        "a Ray cluster)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run the code tests as Ray tasks (one per test seed) on this cluster, and --vector-mode "
                        "ray there: HOST:PORT of its head, 'auto' or 'local' (--vector-mode ray without --ray: "
                        "RAY_ADDRESS, else a local Ray; docs/scaling.md)")
    p.add_argument("--out", "--out-dir", dest="out_dir", type=Path, metavar="DIR",
                   help=f"output folder for checkpoints, skills and reports (default: {d['out_dir'].default})")
    p.add_argument("--skills-dir", type=Path, metavar="DIR", help="skill library folder (default: OUT/skills)")
    p.add_argument("--run-id", help="name of a new run (default: TASK-DATE-TIME-XXXX)")
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML or JSON file of settings (field = value)")
    p.add_argument("--resume", metavar="RUN_ID",
                   help="continue a stopped run from its last finished node, with its saved settings")
    p.add_argument("--list-runs", action="store_true", help="list the runs in the output folder and exit")
    p.add_argument("--no-live", action="store_true", help="plain log lines instead of the live display")
    p.add_argument("--sandbox", choices=SANDBOX_MODES, default=None,
                   help="'strict' refuses to run agent code unless every isolation layer is available "
                        "(namespaces, unprivileged, rlimits, seccomp); 'default' goes on with those the "
                        "machine has and says which are missing (docs/security.md)")
    return p


SETTING_OPTIONS = ("task", "env", "model", "budget_steps", "max_outer_iters", "max_inner_iters", "max_wall_s",
                   "max_model_calls", "train_steps", "eval_episodes", "eval_max_steps", "test_episodes",
                   "test_max_steps",
                   "target_success", "max_replans", "skill_threshold", "seed", "vector_mode", "out_dir",
                   "skills_dir", "run_id")


# ---- run bookkeeping (wall time over sessions, node log) -------------------------------------
class RunLog:
    """events.jsonl (one line per finished node) and sessions.json (wall time of each process)."""

    def __init__(self, run_dir: Path, resumed: bool, read_only: bool = False):
        self.run_dir = run_dir
        self.sessions_path = run_dir / SESSIONS_FILE
        self.events_path = run_dir / EVENTS_FILE
        self.sessions: list[dict[str, Any]] = []
        if self.sessions_path.is_file():
            try:
                self.sessions = json.loads(self.sessions_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                self.sessions = []  # a torn write from a killed process: the wall time of old sessions is lost
        self.session: dict[str, Any] = {"pid": os.getpid(), "resumed": resumed, "started": time.time(),
                                        "ended": time.time(), "nodes": 0}
        if not read_only:  # read_only: only look at a finished run's sessions
            self.sessions.append(self.session)
            self._save_sessions()

    @property
    def earlier_wall_s(self) -> float:
        return sum(s["ended"] - s["started"] for s in self.sessions[:-1])

    @property
    def wall_s(self) -> float:
        return sum(s["ended"] - s["started"] for s in self.sessions)

    def usage(self) -> dict[str, dict[str, int]]:
        """Model calls and tokens per role, summed over every process that worked on the run."""
        total: dict[str, dict[str, int]] = {}
        for s in self.sessions:
            for role, counts in (s.get("usage") or {}).items():
                mine = total.setdefault(role, {})
                for k, v in counts.items():
                    mine[k] = mine.get(k, 0) + int(v)
        return total

    def node_done(self, node: str, session_index: int, usage: dict[str, Any] | None = None) -> None:
        self.session["nodes"] += 1
        self.session["ended"] = time.time()
        if usage is not None:
            self.session["usage"] = usage
        with open(self.events_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": round(time.time(), 3), "session": session_index, "pid": os.getpid(),
                                "node": node}) + "\n")
        self._save_sessions()

    def close(self) -> None:
        self.session["ended"] = time.time()
        self._save_sessions()

    def _save_sessions(self) -> None:
        tmp = self.sessions_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.sessions, indent=1), encoding="utf-8")
        tmp.replace(self.sessions_path)


# ---- the run -------------------------------------------------------------------------------------
def _open_checkpointer(path: Path):
    from langgraph.checkpoint.sqlite import SqliteSaver

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(str(path), check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
    except sqlite3.DatabaseError as e:
        raise RunError(f"checkpoint database {path} cannot be opened ({e}); move it away to start fresh",
                       EXIT_FAILED) from None
    return conn, saver


def _thread_config(settings: RunSettings) -> dict[str, Any]:
    """Thread id = run id (what --resume finds); the builder sizes the recursion limit to the loops."""
    from graph.builder import run_config

    config = run_config(settings)
    config["configurable"]["thread_id"] = settings.run_id
    config["recursion_limit"] = max(int(config.get("recursion_limit", 0)), RECURSION_LIMIT)
    return config


def _settings_from_args(args: argparse.Namespace) -> tuple[RunSettings, bool]:
    """(settings, resumed). A resumed run uses exactly the settings it was started with."""
    if args.resume:
        given = [f"--{k.replace('_', '-')}" for k in SETTING_OPTIONS
                 if k != "out_dir" and getattr(args, k, None) is not None]
        if args.config is not None:
            given.append("--config")
        if args.replay is not None:
            given.append("--replay")
        if given:
            raise RunError(f"--resume continues a run with the settings it was started with; "
                           f"drop {', '.join(given)} (only --out and --no-live go with --resume)")
        out_dir = args.out_dir or RunSettings.model_fields["out_dir"].default
        try:
            return load_run_settings(out_dir, args.resume), True
        except SettingsError as e:
            raise RunError(str(e)) from None
    overrides = {k: getattr(args, k) for k in SETTING_OPTIONS}
    if args.replay is not None:
        if args.model is not None:
            raise RunError("give --model or --replay, not both (--replay FILE is --model replay:FILE)")
        overrides["model"] = f"replay:{args.replay}"
    try:
        settings = make_settings(args.config, overrides)
    except SettingsError as e:
        raise RunError(str(e)) from None
    if settings.run_dir.joinpath("settings.json").exists():
        raise RunError(f"run '{settings.run_id}' already exists in {settings.out_dir}; continue it with "
                       f"--resume {settings.run_id} or pick another --run-id")
    return settings, False


def _counters(values: dict[str, Any]):
    from graph.progress import Counters
    from nodes.report import usage_totals

    plan = values.get("plan") or []
    i = int(values.get("subtask_index") or 0)
    return Counters(subtask=plan[i].get("name", "") if i < len(plan) else "(all done)",
                    subtask_index=min(i, max(len(plan) - 1, 0)),
                    subtask_count=len(plan), outer_iter=int(values.get("outer_iter") or 0),
                    inner_iter=int(values.get("inner_iter") or 0),
                    steps_spent=int(values.get("env_steps_spent") or 0),
                    model_calls=usage_totals(values.get("usage") or {})["calls"])


def _live_values(graph: Any, config: dict) -> dict[str, Any]:
    """The run's state as it is now: inside a running attempt, the attempt's own values (its steps spent)."""
    snapshot = graph.get_state(config, subgraphs=True)
    for task in snapshot.tasks:
        inner = getattr(task, "state", None)
        if inner is not None and getattr(inner, "values", None):
            return {**snapshot.values, **inner.values}
    return dict(snapshot.values)


def _out_option(settings: RunSettings) -> str:
    """' --out DIR' for a resume hint, empty when the run is in the default output folder."""
    default = RunSettings.model_fields["out_dir"].default
    return "" if Path(settings.out_dir) == Path(default) else f" --out {settings.out_dir}"


def _usage_of(model: Any) -> dict[str, Any] | None:
    usage = getattr(model, "usage", None)
    return usage.to_dict() if usage is not None and hasattr(usage, "to_dict") else None


def _node_summary(update: Any) -> str:
    """A few words about what a node just decided, from the last entry it added to `events`."""
    if not isinstance(update, dict) or not update.get("events"):
        return ""
    e = update["events"][-1]
    if not isinstance(e, dict):
        return ""
    kind = e.get("type", "")
    rate = f" {e['success_rate']:.0%}" if isinstance(e.get("success_rate"), (int, float)) else ""
    if kind == "measure":
        return f"{e.get('sub_action')} as {e.get('kind')}:{rate} -> {e.get('verdict')}"
    if kind == "move":
        return f"move {e.get('sub_action')} {e.get('from')} -> {e.get('to')}"
    if kind == "plan":
        return "plan: " + " -> ".join(e.get("subtasks") or [])
    if kind in ("skill", "reuse"):
        return f"{kind} {e.get('subtask')} ({e.get('kind')}{rate})"
    if kind == "stop":
        return f"stop: {e.get('reason')}"
    text = str(e.get("message") or e.get("reason") or "")
    return (f"{kind}: {text}" if kind and text else kind or text)[:120]


def _write_pictures_and_videos(graph: Any, config: dict, settings: RunSettings, values: dict[str, Any]) -> None:
    """GIFs of two held-out episodes of the final chain (RUN_DIR/videos/, graph/video.py), the run drawn over
    the graph and its timeline (graph/pictures.py), before the report is written so that it can show them.
    Each kind that cannot be made costs one warning line, never the finished run."""
    def videos() -> list:
        from graph.video import write_run_videos

        return write_run_videos(values.get("evaluation"), settings.run_dir)

    def pictures() -> list:
        from graph.pictures import write_run_pictures

        return write_run_pictures(graph, config, settings.run_dir)

    for label, what, make in (("video", "videos of play", videos), ("picture", "pictures of the run", pictures)):
        try:
            for path in make():
                print(f"{label}: {path}")
        except Exception as e:
            why = (str(e).splitlines() or [""])[0]
            print(f"warning: no {what}: {type(e).__name__}: {why}", file=sys.stderr)


def execute(settings: RunSettings, resumed: bool, live: bool | None, task_text: str | None = None,
            record: Path | None = None) -> int:
    from nodes.models.base import ModelConfigError, close_model
    from nodes.models.factory import make_model

    try:
        model = make_model(settings.model)
    except ModelConfigError as e:
        raise RunError(str(e)) from None
    if record is not None:
        from nodes.models.recording import RecordingModel

        model = RecordingModel(model, record)
    try:
        return _execute(settings, resumed, live, task_text, model)
    finally:
        close_model(model)  # stops a model server this run started (--model smollm2)


def _execute(settings: RunSettings, resumed: bool, live: bool | None, task_text: str | None, model: Any) -> int:
    from graph.builder import build_graph, run_context, start_state
    from graph.plugins import PluginError, load_plugins
    from graph.progress import RunProgress
    from graph.report import print_summary, write_report
    from nodes.report import build_report

    try:
        plugins = load_plugins()
    except PluginError as e:
        raise RunError(str(e), EXIT_FAILED) from None

    conn, saver = _open_checkpointer(settings.checkpoint_path)
    with closing(conn):
        config = _thread_config(settings)
        graph = build_graph(checkpointer=saver, plugins=plugins)
        context = run_context(settings, model, plugins)
        snapshot = graph.get_state(config)
        fresh = not snapshot.values  # a run killed before its first checkpoint starts from the beginning
        # finished = nothing left to run; a node that completed just before a kill has its writes saved
        # (it is in snapshot.tasks, not in snapshot.next) and resuming applies them without re-running it
        if resumed and not fresh and not snapshot.next and not snapshot.tasks:
            print(f"run {settings.run_id} had already finished; its summary:", file=sys.stderr)
            old_log = RunLog(settings.run_dir, resumed=True, read_only=True)
            # videos already showing these episodes are kept as they are
            _write_pictures_and_videos(graph, config, settings, snapshot.values)
            report = build_report(settings, snapshot.values, old_log.wall_s, usage=old_log.usage())
            print_summary(report, *write_report(report, settings.run_dir))
            return EXIT_OK
        if not resumed:
            save_settings(settings)
        run_log = RunLog(settings.run_dir, resumed)
        session_index = len(run_log.sessions) - 1
        inputs = start_state(settings, task_text) if fresh else None
        progress = RunProgress(settings.run_id, settings.task, settings.budget_steps, settings.max_wall_s,
                               settings.max_model_calls, live=live, elapsed_offset=run_log.earlier_wall_s)
        if resumed and not fresh:
            if snapshot.next:
                progress.message(f"resuming run {settings.run_id} at node(s) {', '.join(snapshot.next)}")
            else:
                names = ", ".join(t.name for t in snapshot.tasks)
                progress.message(f"resuming run {settings.run_id} after node(s) {names} (finished, not re-run)")
        try:
            with progress:
                if snapshot.values:
                    progress.update_counters(_counters(snapshot.values))
                # subgraphs=True: the attempt's own nodes (fast, tools, critic) show as they finish
                for namespace, mode, chunk in graph.stream(inputs, config, context=context, subgraphs=True,
                                                           stream_mode=["updates", "custom", "tasks"],
                                                           durability="sync"):
                    if mode == "custom":
                        progress.custom(chunk)
                        continue
                    if mode == "tasks":  # a task starting carries its input; a finished one its result
                        if "input" in chunk and not str(chunk.get("name", "")).startswith("__"):
                            progress.node_started(chunk["name"])
                        continue
                    for node, update in chunk.items():
                        if node.startswith("__") or (not namespace and node == "attempt"):
                            continue  # LangGraph internals; an attempt's nodes were shown one by one
                        run_log.node_done(node, session_index, _usage_of(model))
                        progress.update_counters(_counters(_live_values(graph, config)))
                        progress.node_done(node, _node_summary(update))
        except KeyboardInterrupt:
            run_log.close()
            print(f"\nrun {settings.run_id} interrupted; resume with: python -m graph.run --resume "
                  f"{settings.run_id}{_out_option(settings)}",
                  file=sys.stderr)
            return EXIT_INTERRUPTED
        except Exception as e:
            run_log.close()
            state = graph.get_state(config)
            where = f" in node(s) {', '.join(state.next)}" if state.next else ""
            print(f"error: run {settings.run_id} failed{where}: {type(e).__name__}: {e}\n"
                  f"Every finished node is checkpointed; after fixing the cause, resume with: "
                  f"python -m graph.run --resume {settings.run_id}"
                  + _out_option(settings), file=sys.stderr)
            return EXIT_FAILED
        run_log.close()
        final = graph.get_state(config)
        _write_pictures_and_videos(graph, config, settings, final.values)
        report = build_report(settings, final.values, run_log.wall_s, model_name=getattr(model, "name", ""),
                              usage=run_log.usage())
        print_summary(report, *write_report(report, settings.run_dir))
    return EXIT_OK


def list_runs(out_dir: Path) -> int:
    ids = list_run_ids(out_dir)
    if not ids:
        print(f"no runs in {out_dir}")
        return EXIT_OK
    for run_id in ids:
        finished = (out_dir / run_id / "report.json").is_file()
        print(f"{run_id:<48} {'finished' if finished else 'stopped (resume with --resume ' + run_id + ')'}")
    return EXIT_OK


def _stop_on_signals() -> dict[int, Any]:
    """Ctrl-C and SIGTERM (`kill`, a scheduler's preemption) stop a run the same way: said, with the command that
    resumes it from its checkpoints (an answerer's run killed with SIGTERM had left its log's header alone).
    RUN_STOPPING is set first: LangGraph waits for the running nodes before the interrupt reaches graph.run, and
    a node waiting for an answer in its worker thread would keep it waiting. The handlers they replace, to put
    back; none off the main thread, where no handler can be set."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(signum: int, frame: Any) -> None:
        RUN_STOPPING.set()
        raise KeyboardInterrupt

    return {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}


def main(argv: Sequence[str] | None = None) -> int:
    RUN_STOPPING.clear()
    previous = _stop_on_signals()
    try:
        return _main(argv)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.sandbox:  # read by every sandbox start, in this process and in PPO's worker processes
        os.environ[SANDBOX_MODE_ENV] = args.sandbox
    try:
        if args.list_runs:
            return list_runs(args.out_dir or RunSettings.model_fields["out_dir"].default)
        settings, resumed = _settings_from_args(args)
        from rl.ray_cluster import RayClusterError, session

        try:  # the cluster is joined before the run starts, so that a wrong address fails at once
            with session(args.ray, connect_now=args.ray is not None or settings.vector_mode == "ray"):
                return execute(settings, resumed, live=False if args.no_live else None, task_text=args.task,
                               record=args.record)
        except RayClusterError as e:
            raise RunError(str(e)) from None
    except RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:  # before the run started: nothing to resume
        print("\ninterrupted before the run started", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
