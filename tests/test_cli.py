"""The command line: --help documents every option; bad input ends with one clear message and
exit code 2, never a traceback."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graph import run
from graph.settings import SettingsError, make_settings
from nodes.settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "graph.run", *args], cwd=cwd or ROOT, capture_output=True,
                          text=True, timeout=120)


def test_help_lists_every_option():
    out = cli("--help")
    assert out.returncode == 0
    for option in ("--env", "--model", "--budget-steps", "--seed", "--out", "--resume", "--config",
                   "--max-wall-s", "--max-model-calls", "--max-outer-iters", "--max-inner-iters",
                   "--eval-episodes", "--train-steps", "--skills-dir", "--run-id", "--list-runs", "task"):
        assert option in out.stdout, option


def test_unknown_task_exits_2_with_close_matches(tmp_path):
    out = cli("obtain diamnd", "--out", str(tmp_path))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "unknown task 'obtain diamnd'" in out.stderr and "'obtain diamond' (collect_diamond)" in out.stderr
    assert not any(tmp_path.iterdir())  # nothing was started


@pytest.mark.parametrize("argv, expected", [
    (["harvest log", "--budget-steps", "5"], "option --budget-steps: field 'budget_steps'"),
    (["harvest log", "--seed", "1000000"], "field 'seed'"),
    (["harvest log", "--run-id", "../escape"], "field 'run_id'"),
    (["harvest log", "--env", "doom"], "invalid choice"),
])
def test_bad_options(tmp_path, capsys, argv, expected):
    try:
        code = run.main([*argv, "--out", str(tmp_path)])
    except SystemExit as e:  # argparse itself rejects a bad choice, also with exit code 2
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_bad_config_file_names_file_and_field(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text('task = "harvest log"\nmax_inner_iters = -1\nbudget_stepz = 10\n')
    assert run.main(["--config", str(cfg), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"config file {cfg}: field 'max_inner_iters'" in err
    assert "field 'budget_stepz': unknown setting" in err and "Traceback" not in err

    broken = tmp_path / "broken.json"
    broken.write_text('{"task": "harvest log",}')
    assert run.main(["--config", str(broken)]) == 2
    assert "invalid JSON at line 1" in capsys.readouterr().err

    assert run.main(["--config", str(tmp_path / "missing.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_config_file_then_options(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[run]\ntask = "obtain diamond"\nbudget_steps = 3000000\nseed = 7\n')
    s = make_settings(cfg, {"seed": 9, "max_wall_s": None})
    assert (s.task, s.budget_steps, s.seed) == ("collect_diamond", 3_000_000, 9)
    assert s.run_id.startswith("collect_diamond-")
    js = tmp_path / "run.json"
    js.write_text(json.dumps({"task": "harvest log", "model": "expert"}))
    assert make_settings(js).model is None  # 'expert' means no language model
    ini = tmp_path / "run.ini"
    ini.write_text("task = wood\n")
    with pytest.raises(SettingsError, match="unknown format '.ini'"):
        make_settings(ini)


def test_resume_of_unknown_run_lists_known_runs(tmp_path, capsys):
    from graph.settings import save_settings
    save_settings(RunSettings(run_id="old-run", out_dir=tmp_path))
    assert run.main(["--resume", "nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no run 'nope'" in err and "old-run" in err
    assert run.main(["--resume", "old-run", "--budget-steps", "5000", "--out", str(tmp_path)]) == 2
    assert "drop --budget-steps" in capsys.readouterr().err


def test_list_runs(tmp_path, capsys):
    from graph.settings import save_settings
    assert run.main(["--list-runs", "--out", str(tmp_path)]) == 0
    assert "no runs" in capsys.readouterr().out
    save_settings(RunSettings(run_id="a-run", out_dir=tmp_path))
    assert run.main(["--list-runs", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "a-run" in out and "stopped (resume with --resume a-run)" in out


def test_every_setting_has_an_option():
    # --help documents every option: each RunSettings field can be given on the command line
    assert set(run.SETTING_OPTIONS) == set(RunSettings.model_fields)
    help_text = run.build_parser().format_help()
    for field in RunSettings.model_fields:
        flag = "task" if field == "task" else "--" + ("out" if field == "out_dir" else field.replace("_", "-"))
        assert flag in help_text, flag


def test_unavailable_backend_is_refused_with_what_to_do():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "graph.run", "harvest log", "--env", "minedojo",
                           "--out", "/tmp/rlgpt-minedojo-test"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "minedojo" in done.stderr and "--env crafter" in done.stderr and "Traceback" not in done.stderr


def test_vector_mode_option_reaches_the_ppo_defaults_of_the_fast_agent(tmp_path):
    from nodes.fast import ppo_defaults

    settings, _ = run._settings_from_args(run.build_parser().parse_args(
        ["harvest log", "--vector-mode", "actors", "--out", str(tmp_path)]))
    assert settings.vector_mode == "actors"
    assert ppo_defaults(settings)["vector_mode"] == "actors"  # what every training the fast agent starts uses
    default = ppo_defaults(RunSettings(out_dir=tmp_path))
    # worker processes by default, split the same on any machine, so that a run replays anywhere
    assert default["vector_mode"] == "actors" and default["num_workers"] == 2
    with pytest.raises(SystemExit):  # argparse refuses an unknown mode with the choices
        run.build_parser().parse_args(["harvest log", "--vector-mode", "threads"])


def test_a_run_stopped_by_sigterm_says_so_and_how_to_resume(tmp_path):
    """`kill` (a scheduler's preemption) stops a run as Ctrl-C does: an answerer's run killed that way had
    left its log's header alone. Here the run waits on a file model that nobody answers."""
    import signal
    import time

    answers, out = tmp_path / "answers", tmp_path / "runs"
    answers.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "graph.run", "harvest log", "--model", f"file:{answers}",
                             "--out", str(out), "--run-id", "stopped", "--no-live"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(answers.glob("*.request.json")):  # the planner's request: the run is waiting on it
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no request was written"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == run.EXIT_INTERRUPTED, stderr
    assert "run stopped interrupted; resume with: python -m graph.run --resume stopped" in stderr, stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("module", ["graph.run", "graph.evaluate", "rl.cli"])
def test_each_command_line_help_documents_every_option(module):
    # rl.cli builds an option per PPOSettings field from the field's doc: a doc that said "95%" made
    # `python -m rl.ppo --help` end in a traceback (argparse formats help text with %)
    import importlib

    parser = importlib.import_module(module).build_parser()
    help_text = parser.format_help()
    for action in parser._actions:
        for option in action.option_strings:
            assert option in help_text, option
