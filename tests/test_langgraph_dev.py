"""LangGraph's own dev server (`langgraph dev`, the dev extra's langgraph-cli[inmem]) serving this project's
langgraph.json: the graph with its attempt subgraph read through the HTTP API, a run started from its task
alone that ends in a report, and a clear error for an unknown task. Also the start state such a run gets.

The server runs as a subprocess on a free loopback port, in a temporary folder (its own persistence,
.langgraph_api/, goes there) with a copy of langgraph.json whose paths point back at the project, and
small budgets from an RLGPT_CONFIG file. It is always stopped at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodes.settings import RunSettings
from nodes.state import RunInputError, initial_state, start_update

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60
SMALL_RUN = {"budget_steps": 4000, "train_steps": 1000, "eval_episodes": 2, "test_episodes": 4,
             "max_inner_iters": 1, "max_outer_iters": 1, "max_wall_s": 120}


def test_a_task_alone_gets_the_start_state_of_the_command_line():
    default_budget = RunSettings.model_fields["budget_steps"].default
    assert start_update({"task": "harvest log"}, default_budget) == initial_state(
        "collect_wood", "harvest log", default_budget)
    assert start_update({"task": "obtain diamond", "budget_steps": 500}, 9)["budget_steps"] == 500
    assert start_update(initial_state("collect_wood", "harvest log", 100), 9) == {}  # a full start state
    with pytest.raises(RunInputError, match="unknown task 'fly'"):
        start_update({"task": "fly"}, 100)
    with pytest.raises(RunInputError, match="input field 'task': Field required"):
        start_update({}, 100)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _langgraph_cli() -> Path:
    cli = Path(sys.executable).with_name("langgraph")
    if not cli.is_file():
        pytest.fail(f"{cli} is missing: the dev extra installs it (pip install -e '.[dev]', "
                    "which brings langgraph-cli[inmem])")
    return cli


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (uvicorn and its workers), SIGKILL if it lingers."""
    for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[dict]:
    from langgraph_sdk import get_sync_client

    cli = _langgraph_cli()
    work = tmp_path_factory.mktemp("langgraph-dev")
    config = json.loads((ROOT / "langgraph.json").read_text())
    config["dependencies"] = [str(ROOT)]
    config["graphs"] = {name: str(ROOT / spec.removeprefix("./")) for name, spec in config["graphs"].items()}
    (work / "langgraph.json").write_text(json.dumps(config))
    (work / "small.json").write_text(json.dumps({**SMALL_RUN, "out_dir": str(work / "runs")}))
    env = {**os.environ, "RLGPT_CONFIG": str(work / "small.json"), "LANGGRAPH_CLI_NO_ANALYTICS": "1",
           "LANGGRAPH_NO_VERSION_CHECK": "true", "LANGSMITH_TRACING": "false"}
    port = _free_port()
    log_path = work / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([str(cli), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                                 "--port", str(port), "--config", str(work / "langgraph.json")],
                                cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        client = get_sync_client(url=f"http://127.0.0.1:{port}", api_key=None, timeout=(5, 120, 30, 5))
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                assistants = client.assistants.search(graph_id="rlgpt")
                if assistants:
                    break
            except Exception:  # not listening yet
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"langgraph dev did not serve the graph within {START_TIMEOUT_S} s:\n"
                            f"{log_path.read_text()[-4000:]}")
            time.sleep(0.5)
        yield {"client": client, "assistant_id": assistants[0]["assistant_id"], "log": log_path}
    finally:
        _stop(proc)


def _log_has_no_blocking_call(server) -> None:
    log = server["log"].read_text(errors="replace")
    assert "BlockingError" not in log, log[-4000:]


@pytest.mark.slow
def test_the_graph_with_its_attempt_subgraph(server):
    client, assistant = server["client"], server["assistant_id"]
    graph = client.assistants.get_graph(assistant, xray=True)
    nodes = {n["id"] for n in graph["nodes"]}
    assert {"planner", "subtask", "slow", "executor", "report",
            "attempt:fast", "attempt:tools", "attempt:critic"} <= nodes, nodes
    schemas = client.assistants.get_schemas(assistant)
    assert schemas["input_schema"]["required"] == ["task"]  # Studio's form: the task, the rest optional
    assert "budget_steps" in schemas["input_schema"]["properties"]
    _log_has_no_blocking_call(server)


@pytest.mark.slow
def test_a_run_from_its_task_alone_ends_in_a_report(server):
    client, assistant = server["client"], server["assistant_id"]
    thread = client.threads.create()
    final = client.runs.wait(thread["thread_id"], assistant, input={"task": "collect wood"})
    assert "__error__" not in final, final
    assert (final["task"], final["task_text"]) == ("collect_wood", "collect wood")
    assert final["budget_steps"] == SMALL_RUN["budget_steps"]  # the settings' budget, not 0
    assert final["stop_reason"] is None
    report = final["report"]
    assert report["run_id"] == thread["thread_id"] and report["plan"] == ["collect_wood"]
    assert report["evaluation"]["ran"] and report["evaluation"]["episodes"] == SMALL_RUN["eval_episodes"]
    _log_has_no_blocking_call(server)


@pytest.mark.slow
def test_bad_input_is_a_clear_error(server):
    client, assistant = server["client"], server["assistant_id"]
    for bad, expected in (({"task": "fly to the moon"}, "unknown task 'fly to the moon'"),
                          ({"task": "collect wood", "budget_steps": 5}, "input field 'budget_steps'")):
        thread = client.threads.create()
        out = client.runs.wait(thread["thread_id"], assistant, input=bad, raise_error=False)
        error = out["__error__"]
        assert error["error"] == "RunInputError" and expected in error["message"], error
