"""The sandbox: static checker, restricted namespace, limited child process, and the game API's
isolation from the simulator."""

from __future__ import annotations

import os
import sys
import sysconfig
import time
import types
import warnings

import numpy as np
import pytest

from envs.coded import CodedAction
from envs.crafter_env import CrafterEnv
from sandbox import (
    ALLOWED_MODULES,
    AgentCode,
    CodeRejected,
    SandboxLimits,
    SandboxUnavailable,
    UnsafeCodeError,
    check_source,
    launch,
)
from sandbox.loader import load_coded_actions
from sandbox.namespace import CodeLoadError, build_namespace


def rejection(source: str) -> str:
    with pytest.raises(UnsafeCodeError) as info:
        check_source(source)
    return str(info.value)


# --- static checker ----------------------------------------------------------------------

@pytest.mark.parametrize("module", ["os", "subprocess", "socket", "sys", "dataclasses", "operator", "importlib"])
def test_imports_outside_the_allow_list_are_rejected_with_line_and_allowed_list(module):
    message = rejection(f"x = 1\nimport {module}\n")
    assert f"line 2: import of '{module}' is not allowed" in message
    assert "allowed: math, random" in message


def test_from_imports_of_forbidden_modules_submodules_and_private_names_are_rejected():
    assert "line 1: import from 'os.path'" in rejection("from os.path import join\n")
    assert "import of 'collections.abc'" in rejection("import collections.abc\n")
    assert "private name '_inst'" in rejection("from random import _inst\n")
    assert "import *" in rejection("from math import *\n")
    assert "not 'execute'" in rejection("from envs.coded import execute\n")


@pytest.mark.parametrize("source, needle", [
    ("f = open('x', 'w')", "the name 'open' is not allowed"),
    ("m = __import__('os')", "the name '__import__' is not allowed"),
    ("eval('1')", "the name 'eval' is not allowed"),
    ("exec('x = 1')", "the name 'exec' is not allowed"),
    ("g = getattr(game, '_obs')", "the name 'getattr' is not allowed"),
    ("t = type(game)", "the name 'type' is not allowed"),
    ("b = __builtins__", "the name '__builtins__' is not allowed"),
    ("g = globals()", "the name 'globals' is not allowed"),
    ("s = ().__class__.__bases__[0].__subclasses__()", "attribute '__subclasses__' is not allowed"),
    ("c = game.__class__", "attribute '__class__' is not allowed"),
    ("o = game._obs", "attribute '_obs' is not allowed"),
    ("f = game.nearest.__func__.__globals__", "attribute '__globals__' is not allowed"),
    ("f = gen.gi_frame.f_back.f_locals", "attribute 'f_back' is not allowed"),
    ("t = '{0.x}'.format(game)", "attribute 'format' is not allowed"),
    ("game.health = 9", "assigning or deleting the attribute 'health' is not allowed"),
    ("class A:\n    pass", "class definitions are not allowed"),
    ("async def f(game):\n    pass", "async functions are not allowed"),
])
def test_escape_routes_are_rejected(source, needle):
    assert needle in rejection(source)


def test_every_violation_is_listed_with_its_line():
    message = rejection("import os\nx = 1\ny = open('f')\nz = game._obs\n")
    assert "line 1:" in message and "line 3:" in message and "line 4:" in message
    assert "line 2:" not in message


def test_syntax_error_is_reported_with_line():
    message = rejection("def main(game):\n    yield 'do'\n    if x\n")
    assert "line 3: syntax error" in message


def test_empty_or_non_string_code_is_rejected_clearly():
    assert "the code is empty" in rejection("   \n")
    assert "must be a string" in rejection(42)  # type: ignore[arg-type]


def test_ordinary_coded_action_passes():
    check_source(
        "import math\nfrom collections import deque\nfrom envs.coded import coded_action\n"
        "@coded_action(max_steps=20)\n"
        "def chop(game):\n"
        "    for _ in range(3):\n"
        "        target = game.nearest('tree')\n"
        "        if target is None:\n"
        "            yield from game.explore(5)\n"
        "        else:\n"
        "            yield from game.go_to(target)\n"
        "            yield 'do'\n")


# --- restricted namespace (second layer, in case the checker misses something) -------------

def test_namespace_has_no_dangerous_builtins_and_imports_only_allowed_modules():
    ns = build_namespace()
    builtins = ns["__builtins__"]
    for name in ("open", "exec", "eval", "compile", "getattr", "type", "globals", "vars", "object"):
        assert name not in builtins
    with pytest.raises(ImportError, match="import of 'os' is not allowed"):
        exec("import os", ns)  # bypasses the checker on purpose
    with pytest.raises(NameError):
        exec("open('x')", build_namespace())


@pytest.mark.parametrize("name", [m for m in ALLOWED_MODULES if m != "envs.coded"])
def test_allowed_modules_are_served_without_submodules_or_private_names(name):
    ns = build_namespace()
    exec(f"import {name} as mod", ns)
    proxy = ns["mod"]
    assert vars(proxy), f"{name} proxy is empty"
    for key, value in vars(proxy).items():
        assert not key.startswith("_")
        assert not isinstance(value, types.ModuleType), f"{name}.{key} is a module"


def test_print_goes_to_the_output_callback():
    seen = []
    load_coded_actions("print('hello', 3)\ndef main(game):\n    yield 'noop'\n", output=seen.append)
    assert seen == ["hello 3"]


# --- loading coded actions ---------------------------------------------------------------

LOADER_SOURCE = '''
def _walk(game):
    yield "move_left"

def distance(a, b):
    return abs(a[0] - b[0]) + abs(a[1] - b[1])

@coded_action(max_steps=7)
def chop(game):
    yield from _walk(game)
    yield "do"

def main(game):
    yield from chop(game)
'''


def test_load_coded_actions_returns_generators_in_order_and_skips_helpers():
    actions = load_coded_actions(LOADER_SOURCE)
    assert [a.name for a in actions] == ["chop", "main"]
    assert all(isinstance(a, CodedAction) for a in actions)
    assert actions[0].max_steps == 7
    assert list(actions[1].fn(None)) == ["move_left", "do"]


def test_decorated_non_generator_and_code_without_actions_are_errors():
    with pytest.raises(CodeLoadError, match="not a generator"):
        load_coded_actions("@coded_action()\ndef f(game):\n    return 1\n")
    with pytest.raises(CodeLoadError, match="defines no coded action"):
        load_coded_actions("def helper(x):\n    return x\n")


def test_top_level_runtime_error_names_the_line():
    with pytest.raises(CodeLoadError, match=r"line 2 .*ZeroDivisionError"):
        load_coded_actions("a = 1\nb = a / 0\ndef main(game):\n    yield 'do'\n")


# --- the sandbox process (tests/test_hostile.py attacks it; these check its plain behaviour) --------

WALK = "def main(game):\n    print('start', game.pos)\n    for _ in range(3):\n        yield 'move_left'\n"


def _env():
    env = CrafterEnv("collect_wood")
    env.reset(seed=3)
    return env


def test_agent_code_names_its_actions_and_the_env_steps_on_the_trusted_side():
    env, prints = _env(), []
    with AgentCode([WALK]) as code:
        assert code.names == ["main"]
        outcome = code.execute(env, "main", max_steps=10, on_print=prints.append)
    assert outcome.error is None and outcome.steps == 3 == env.episode_steps
    assert outcome.actions == ["move_left"] * 3
    assert prints == ["start (0, 0)"]


def test_endless_loop_is_killed_at_the_step_deadline_and_the_next_call_runs_in_a_fresh_process():
    source = WALK + ("\ndef spin(game):\n    yield 'noop'\n    while True:\n        try:\n"
                     "            while True:\n                pass\n        except Exception:\n            pass\n")
    env = _env()
    with AgentCode([source], limits=SandboxLimits(step_timeout_s=1.0)) as code:
        start = time.monotonic()
        outcome = code.execute(env, "spin", max_steps=10)
        assert time.monotonic() - start < 5
        assert outcome.steps == 1 == env.episode_steps
        assert "no answer within 1.5 s" in outcome.error  # the timeout and the grace for the timer's report
        again = code.execute(env, "main", max_steps=10)
        assert again.error is None and again.steps == 3 and code.restarts == 1


def test_a_step_that_waits_for_a_core_is_not_taken_for_an_endless_loop():
    """The step deadline counts the code's CPU time (sandbox.deadline): a sandbox stopped for 2.5 s in the
    middle of a call (SIGSTOP, as a process starved on a busy machine), with a 1 s step limit, answers once
    it runs again, and the call goes on in the same process. (Code that sleeps or blocks is still stopped,
    at the wall cap: tests/test_hostile.py.)"""
    import signal as signals
    import threading

    env = _env()
    with AgentCode([WALK], limits=SandboxLimits(step_timeout_s=1.0)) as code:
        assert code.begin("main", env.game) == ("act", "move_left")
        tree = [code._proc.pid, *launch.descendants(code._proc.pid)]
        for pid in tree:
            os.kill(pid, signals.SIGSTOP)
        threading.Timer(2.5, lambda: [os.kill(pid, signals.SIGCONT) for pid in tree]).start()
        start = time.monotonic()
        env.step(env.primitive_actions.index("move_left"))
        assert code.advance(env.game) == ("act", "move_left")
        assert time.monotonic() - start > 2.0 and code.restarts == 0 and code.last_failure is None


def test_code_that_prints_and_then_computes_for_a_while_is_answered():
    """A process that has talked during a request keeps the plain deadline and is read on until it (the CPU
    probe never comes for it): an honest step that prints, then computes for more than the probe's 0.25 s,
    gets its answer read."""
    source = ("def slow(game):\n    yield 'noop'\n    print('thinking')\n    n = 0\n"
              "    for i in range(8_000_000):\n        n += i\n    yield 'noop'\n")
    env, prints = _env(), []
    with AgentCode([source], limits=SandboxLimits(step_timeout_s=5.0)) as code:
        start = time.monotonic()
        outcome = code.execute(env, "slow", max_steps=5, on_print=prints.append)
        assert outcome.error is None and outcome.steps == 2 and prints == ["thinking"]
        assert time.monotonic() - start < 4.0


@pytest.mark.parametrize("cpu_rate, stopped_at, starved", [
    (1.0, 1.5, False),   # computes all the time: stopped at the plain deadline (the timeout and the 0.5 s grace)
    (0.5, 2.75, False),  # half a core: stopped when it may have computed 1.5 s (all of the first 0.25 s counts)
    (0.0, 5.0, True),    # computes nothing (sleeps, blocks, or never gets a core): stopped at the wall cap
    (None, 1.5, False),  # its CPU time cannot be read: the wall clock decides, as before
])
def test_a_request_deadline_counts_cpu_time_within_a_wall_cap(cpu_rate, stopped_at, starved):
    from sandbox.deadline import MAX_WALL_FACTOR, PROBE_S, RequestDeadline

    now = [100.0]
    clock = RequestDeadline(1.0, now[0], lambda: None if cpu_rate is None else 7.0 + cpu_rate * (now[0] - 100.0))
    assert clock.read_until() == 100.0 + PROBE_S and clock.hard == 100.0 + MAX_WALL_FACTOR
    while True:  # a reader that never gets an answer: it wakes at read_until() and asks whether to wait on
        now[0] = clock.read_until()
        if not clock.keep_waiting(now[0]):
            break
    assert now[0] - 100.0 == pytest.approx(stopped_at, abs=0.06) and clock.starved_to_the_cap == starved


@pytest.mark.parametrize("cpu_rate, stopped_at", [
    (0.0, 5.0),   # it computes nothing (its answer waits unread): read on to the wall cap, not killed at 3 s
    (1.0, 4.25),  # it computes all the time: stopped once it may have computed the 1.5 s from the late look on
])
def test_a_host_held_up_past_the_deadline_does_not_charge_its_delay_to_the_code(cpu_rate, stopped_at):
    from sandbox.deadline import RequestDeadline

    now = [100.0]
    clock = RequestDeadline(1.0, now[0], lambda: 7.0 + cpu_rate * (now[0] - 100.0))
    now[0] = 103.0  # the host's first look comes 3 s late, past the 1.5 s deadline
    assert clock.keep_waiting(now[0])
    while True:
        now[0] = clock.read_until()
        if not clock.keep_waiting(now[0]):
            break
    assert now[0] - 100.0 == pytest.approx(stopped_at, abs=0.06)


def test_memory_limit_stops_a_large_allocation_and_a_small_one_still_works():
    source = "def big(game):\n    block = [0] * (200 * 1024 * 1024)\n    yield 'noop'\n" + WALK
    with AgentCode([source], limits=SandboxLimits(memory_mb=64)) as code:
        assert "MemoryError" in code.execute(_env(), "big", max_steps=1).error
        assert code.execute(_env(), "main", max_steps=5).error is None


def test_a_top_level_error_or_rule_violation_is_a_rejection_with_its_kind():
    with pytest.raises(CodeRejected) as info:
        AgentCode(["x = 1 / 0\n" + WALK])
    assert info.value.kind == "load" and "ZeroDivisionError" in str(info.value)
    with pytest.raises(CodeRejected) as info:
        AgentCode(["import os\n" + WALK])
    assert info.value.kind == "unsafe" and "line 1" in str(info.value)


def test_every_layer_this_machine_offers_is_applied():
    with AgentCode([WALK]) as code:
        layers = code.layers
    assert layers["unprivileged"] is True and layers["rlimits"] is True
    if sys.platform.startswith("linux") and os.uname().machine in ("x86_64", "aarch64"):
        assert layers["seccomp"] is True
    assert layers["namespaces"] is launch.namespaces_available()[0] or isinstance(layers["namespaces"], str)


def test_strict_mode_refuses_without_namespaces_and_default_mode_goes_on(monkeypatch, caplog):
    monkeypatch.setattr(launch, "namespaces_available", lambda: (False, "bwrap is missing (test)"))
    monkeypatch.setenv("RLGPT_SANDBOX", "strict")
    with pytest.raises(SandboxUnavailable, match="bwrap is missing"):
        AgentCode([WALK])
    monkeypatch.setenv("RLGPT_SANDBOX", "default")
    with AgentCode([WALK]) as code:
        assert code.execute(_env(), "main", max_steps=3).steps == 3
        assert code.layers["namespaces"] == "bwrap is missing (test)"


def test_mask_asks_the_preconditions_and_no_round_trip_without_any():
    source = ("from envs.coded import coded_action\n"
              "@coded_action(precondition=lambda game: game.has('wood'))\n"
              "def place(game):\n    yield 'place_table'\n" + WALK)
    env = _env()
    for host_masks in (True, False):  # read on the trusted side (sandbox.preconditions), or asked
        with AgentCode([source], host_masks=host_masks) as code:
            assert code.mask(env.game) == [False, True]
    with AgentCode([WALK]) as code:
        code.close()  # no process: the answer cannot have come from it
        assert code.mask(env.game) == [True]


def test_an_answer_read_late_counts():
    """A request sent now and read later (AgentCode.*_later) has its deadline from when it was sent: an answer
    that came while the host did other work for longer than the deadline is read, not taken for a hang.
    (A process that never answers is stopped at the deadline: tests/test_hostile.py, through the same path.)"""
    source = ("from envs.coded import coded_action\n"
              "@coded_action(precondition=lambda game: game.has('wood'))\n"
              "def place(game):\n    yield 'place_table'\n" + WALK)
    env = _env()
    # masks answered by the sandbox (host_masks=False), so that the mask request crosses too
    with AgentCode([source], limits=SandboxLimits(step_timeout_s=0.3), host_masks=False) as code:
        later = code.mask_later(env.game)
        time.sleep(0.8)  # the host steps other envs meanwhile
        assert later.get() == [False, True]
        assert code.alive and code.restarts == 0 and code.last_failure is None
        first = code.begin_later("main", env.game)
        second = code.mask_later(env.game)  # a new request reads the one before it first, in order
        assert first.get() == ("act", "move_left") and second.get() == [False, True]


def test_invalid_limits_are_refused():
    with pytest.raises(ValueError, match="step_timeout_s"):
        SandboxLimits(step_timeout_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=1)


def test_the_read_deadline_holds_while_the_writer_keeps_the_pipe_full():
    """sandbox.wire.FrameReader checks its deadline before every read, not only when the pipe is empty:
    a writer that never lets it run dry cannot hold the reader (issue 26)."""
    import threading

    from sandbox.wire import FrameReader, ProtocolError, encode

    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    chunk = encode({"print": ""}) * 4000
    stop = threading.Event()

    def write():
        try:
            while not stop.is_set():
                os.write(write_fd, chunk)
        except OSError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    reader, frames = FrameReader(read_fd, 1 << 20), 0
    start = time.monotonic()
    try:
        with pytest.raises(ProtocolError) as info:
            while True:
                reader.read(start + 0.5)
                frames += 1
    finally:
        stop.set()
        os.close(read_fd)
        writer.join(5)
        os.close(write_fd)
    assert info.value.timed_out and frames > 1000
    assert time.monotonic() - start < 1.5
    assert reader.frames == frames and reader.received == frames * len(encode({"print": ""}))


# --- no attribute path from the game API to the simulator ----------------------------------

def _search(root, is_target, limit=300_000):
    """Walk every object reachable from `root` through attributes (dunders included), closures,
    bound-method internals, function globals and container items; return (first target found or
    None, objects visited, whether the walk finished). Modules are not entered: none stores a live
    environment, which `test_no_module_global_holds_an_environment` checks."""
    with warnings.catch_warnings():  # reading deprecated attributes along the way warns
        warnings.simplefilter("ignore")
        return _walk(root, is_target, limit)


def _walk(root, is_target, limit):
    seen, stack = set(), [root]
    while stack and len(seen) < limit:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, types.ModuleType):
            continue
        seen.add(id(obj))
        if is_target(obj):
            return obj, len(seen), False
        if _foreign_code(obj) or isinstance(obj, _LEAVES):
            continue  # library code and plain values hold no reference to an episode's objects
        children = [type(obj)]
        if isinstance(obj, dict):
            children += list(obj.keys()) + list(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            children += list(obj)
        for name in dir(obj):
            try:
                children.append(object.__getattribute__(obj, name) if not isinstance(obj, type)
                                else type.__getattribute__(obj, name))
            except Exception:
                continue
        # the widest (a function's globals) first, so that the depth-first walk follows the direct references
        # (closures, a bound method's self and function) before it: a leak held there is found within the limit
        # however much the process's modules hold
        for name in ("__globals__", "__dict__", "__wrapped__", "__func__", "__self__", "__closure__"):
            value = getattr(obj, name, None)
            if value is not None:
                children.append(value)
        if isinstance(obj, types.CellType):
            try:
                children.append(obj.cell_contents)
            except ValueError:
                pass
        stack.extend(children)
    return None, len(seen), not stack


_LIBRARY_DIRS = tuple(os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "purelib", "platlib"))
# Values with no outgoing references worth following; arrays also make fresh views (.T, .real)
# on every access, which would keep an attribute walk going forever. Arrays are compared by memory.
_LEAVES = (str, bytes, int, float, complex, bool, type(None), np.ndarray, np.generic)
_CODE_TYPES = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
               types.WrapperDescriptorType, types.MethodWrapperType, types.GetSetDescriptorType,
               types.MemberDescriptorType, types.ClassMethodDescriptorType)


def _foreign_code(obj) -> bool:
    """A function or class of the standard library or an installed package other than crafter:
    such code holds no reference to one episode's objects, and walking it all would take minutes."""
    if not isinstance(obj, _CODE_TYPES):
        return False
    name = getattr(obj, "__module__", None) or "builtins"
    if name.split(".")[0] == "crafter":
        return False
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    return path is None or os.path.realpath(path).startswith(_LIBRARY_DIRS)


def _is_simulator_object(obj) -> bool:
    import crafter
    from crafter import engine, objects
    return isinstance(obj, (crafter.Env, engine.World, engine.Textures, objects.Object))


def _find_simulator(env):
    """The crafter.Env inside our env, wherever the backend keeps it (searched, not hard-coded)."""
    import crafter
    stack = [env]
    for _ in range(3):
        nxt = []
        for obj in stack:
            for value in getattr(obj, "__dict__", {}).values():
                if isinstance(value, crafter.Env):
                    return value
                nxt.append(value)
        stack = nxt
    raise AssertionError("no crafter.Env found inside CrafterEnv")


def test_no_attribute_path_leads_from_the_game_api_to_the_simulator():
    from envs.crafter_env import CrafterEnv

    env = CrafterEnv(task="collect_wood")
    env.reset(seed=3)
    for action in (1, 2, 3, 5):
        env.step(action)
    sim = _find_simulator(env)
    world = sim._world
    live = {id(env), id(sim), id(world), id(world._mat_map), id(sim._player)}

    def leaks(obj):
        return (id(obj) in live or _is_simulator_object(obj)
                or (isinstance(obj, np.ndarray) and np.shares_memory(obj, world._mat_map)))

    hit, visited, finished = _search(env.game, leaks)
    assert hit is None, f"the game API reaches {type(hit)}"
    assert finished and visited > 1000  # the walk really went through classes, methods and globals
    recipes, _, _ = _search(env.game, lambda o: isinstance(o, dict) and "MAKE_RECIPES" in o)
    assert recipes is not None  # ... including module globals


def test_no_module_global_holds_an_environment():
    from envs.crafter_env import CrafterEnv

    env = CrafterEnv(task="collect_wood")
    env.reset(seed=0)
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("envs", "tools"):
            for value in vars(module).values():
                assert not isinstance(value, CrafterEnv) and not _is_simulator_object(value), name


def test_game_api_returns_copies_and_has_no_setters():
    from envs.crafter_env import CrafterEnv

    env = CrafterEnv(task="collect_wood")
    env.reset(seed=0)
    env.game.inventory["diamond"] = 99
    assert env.game.inventory["diamond"] == 0
    with pytest.raises(AttributeError):
        env.game.health = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        env.game.anything = 1  # type: ignore[attr-defined]


def test_sandboxed_code_cannot_name_the_route_to_the_world():
    for probe in ("w = game.__class__", "w = game._obs", "w = game._memory", "w = game.nearest.__self__",
                  "w = game.explore(1).gi_frame"):
        with pytest.raises(UnsafeCodeError):
            check_source("def main(game):\n    " + probe + "\n    yield 'noop'\n")


def test_the_walk_finds_a_simulator_hidden_in_a_closure():
    """Guards the test above: the walk must be able to see a leak when there is one."""
    from envs.crafter_env import CrafterEnv

    env = CrafterEnv(task="collect_wood")
    env.reset(seed=0)
    sim = _find_simulator(env)

    def leaky():
        return sim

    hit, _, _ = _search(types.SimpleNamespace(helper=leaky), lambda o: o is sim)
    assert hit is sim


# --- one boundary: nothing outside the sandbox process loads agent source ----------------------

UNTRUSTED_SIDE = {"sandbox.loader", "sandbox.namespace", "sandbox.child", "sandbox.confine"}


def test_only_the_sandbox_process_imports_the_modules_that_run_agent_source():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    offenders = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] in (".venv", "tests", "build") or rel.parts[0].startswith("."):
            continue
        module = ".".join(rel.with_suffix("").parts)
        if module in UNTRUSTED_SIDE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{module} imports {n}" for n in names if n in UNTRUSTED_SIDE]
    assert offenders == []


def test_a_sandbox_started_from_a_thread_that_ends_lives_on():
    """Tool calls run in pool threads that end after the call; the kernel's parent-death signal is tied to
    the forking thread, so the processes must not be forked there (sandbox.launch starts them itself)."""
    import threading

    holder = {}
    thread = threading.Thread(target=lambda: holder.setdefault("code", AgentCode([WALK])))
    thread.start()
    thread.join()
    time.sleep(0.3)
    with holder["code"] as code:
        outcome = code.execute(_env(), "main", max_steps=3)
        assert outcome.error is None and outcome.steps == 3 and code.restarts == 0
    with AgentCode([WALK]) as spare_started_in_that_thread:
        assert spare_started_in_that_thread.execute(_env(), "main", max_steps=3).steps == 3


# --- where the checkout and the venv live; the missing-layer warning (issue 26) ---------------------

# Run by the interpreter of a venv under /tmp, from a copy of the two packages under /tmp: the layout of a
# CI clone or a `git worktree`, which the empty /tmp of the sandbox's file system used to hide.
_UNDER_TMP = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from envs.crafter_env import CrafterEnv
from sandbox import AgentCode, launch
env = CrafterEnv("collect_wood")
env.reset(seed=3)
with AgentCode([sys.argv[2]]) as code:
    outcome = code.execute(env, "main", max_steps=3)
    inner = launch.descendants(code._proc.pid)
    def pid_ns(pid):
        try:
            return os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            return None
    print(json.dumps({"executable": sys.executable, "prefix": sys.prefix, "root": launch.PROJECT_ROOT,
                      "sandbox": launch.__file__, "probe": launch.namespaces_available(),
                      "layers": code.layers, "command": code._proc.args, "steps": outcome.steps,
                      "error": outcome.error, "own_ns": pid_ns("self"),
                      "inner_ns": [pid_ns(p) for p in inner]}))
"""


def test_a_checkout_and_a_venv_under_tmp_run_in_namespaces():
    if not launch.namespaces_available()[0]:
        pytest.skip(f"no namespaces on this machine at all: {launch.namespaces_available()[1]}")
    import json
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    top = Path(tempfile.mkdtemp(prefix="rlgpt-layout-", dir="/tmp"))
    try:
        venv, src = top / "venv", top / "src"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        python = venv / "bin" / "python"
        site = subprocess.run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        # the dependencies stay where they are installed; plain path lines, so that no .pth file of theirs
        # runs (an editable install's finder would map `sandbox` back to this checkout)
        deps = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
        Path(site, "rlgpt_deps.pth").write_text("\n".join(deps) + "\n")
        root = Path(launch.PROJECT_ROOT)
        for package in launch.CHILD_PACKAGES:
            shutil.copytree(root / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
        done = subprocess.run([str(python), "-I", "-c", _UNDER_TMP, str(src), WALK], cwd="/", capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(top, ignore_errors=True)
    # honest: the interpreter and the packages really were the ones under /tmp
    assert seen["executable"] == str(venv / "bin" / "python") and seen["prefix"] == str(venv)
    assert seen["root"] == str(src) and seen["sandbox"].startswith(str(src / "sandbox") + "/")
    assert seen["probe"] == [True, ""], seen["probe"]
    assert seen["layers"]["namespaces"] is True
    command = seen["command"]
    assert "--unshare-all" in command and command[command.index("--") + 1] == seen["executable"]
    assert seen["steps"] == 3 and seen["error"] is None
    visible = [ns for ns in seen["inner_ns"] if ns is not None]
    assert all(ns != seen["own_ns"] for ns in visible)  # where /proc lets us look: another PID namespace


def test_the_probe_imports_what_the_child_imports(monkeypatch):
    """A file system that lacks the project's packages fails the probe (before any code runs), instead of
    passing it and failing every start."""
    if not launch.namespaces_available()[0]:
        pytest.skip(f"no namespaces on this machine at all: {launch.namespaces_available()[1]}")
    full = launch.bwrap_command

    def without_the_packages() -> list[str]:
        args = full()
        for package in launch.CHILD_PACKAGES:
            path = os.path.join(launch.PROJECT_ROOT, package)
            i = args.index(path)
            del args[i - 1:i + 2]
        return args

    monkeypatch.setattr(launch, "bwrap_command", without_the_packages)
    monkeypatch.setattr(launch, "_bwrap_ok", None)
    monkeypatch.setattr(launch, "_bwrap_problem", "")
    ok, problem = launch.namespaces_available()
    assert not ok and "No module named" in problem and "inside bwrap" in problem


def _drop_spare() -> None:
    with launch._lock:
        spare, launch._spare = launch._spare, None
    if spare is not None:
        launch.stop_process(spare)


@pytest.fixture
def failing_bwrap(tmp_path, monkeypatch):
    """A bwrap that cannot create namespaces (as in Docker's default profile), found first on PATH."""
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace (test)' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr(launch, "_bwrap_ok", None)
    monkeypatch.setattr(launch, "_bwrap_problem", "")
    monkeypatch.delenv("RLGPT_SANDBOX", raising=False)
    _drop_spare()
    yield
    _drop_spare()  # started without namespaces: it must not serve a later test


_START_ONE = ("import logging, sys\nlogging.basicConfig()\nfrom sandbox import AgentCode\n"
              "AgentCode([sys.argv[1]]).close()\n")


def test_missing_layers_are_reported_once_per_run_not_once_per_process(failing_bwrap, monkeypatch, caplog):
    import subprocess

    from sandbox import host

    monkeypatch.setattr(host, "_warned", set())
    monkeypatch.setenv(host.WARNED_ENV, "")  # restored (removed) after the test
    message = "agent code runs without these sandbox layers"
    layers = host.check_layers()  # what a run does before it starts its workers
    assert "No permissions to create new namespace (test)" in str(layers["namespaces"])
    with AgentCode([WALK]):
        pass
    assert sum(message in r.getMessage() for r in caplog.records) == 1
    assert os.environ[host.WARNED_ENV] == "namespaces"

    def warnings_of_a_worker(env: dict) -> int:
        done = subprocess.run([sys.executable, "-c", _START_ONE, WALK], cwd=launch.PROJECT_ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stderr.count(message)

    assert warnings_of_a_worker(dict(os.environ)) == 0  # a process this run starts now inherits the report
    alone = {k: v for k, v in os.environ.items() if k != host.WARNED_ENV}
    assert warnings_of_a_worker(alone) == 1  # the control: on its own, a process does warn


def test_the_random_module_of_agent_code_plays_an_episode_the_same_way_every_time():
    """Agent code's `random` is seeded from the episode's helper seed (the env's own stream, not the world seed)
    when the sandbox takes up an episode: the same code on the same world gives the same steps, in a fresh
    sandbox process or the same one, and another episode of the stream draws other numbers."""
    from envs.crafter_env import CrafterEnv
    from sandbox import AgentCode

    source = ("import random\n\n\ndef wander(game):\n    for _ in range(40):\n"
              "        yield random.choice(['move_left', 'move_right', 'move_up', 'move_down', 'noop'])\n")

    def play(code, env, world):
        env.reset(seed=world)
        return code.execute(env, "wander", max_steps=40).actions

    env = CrafterEnv(task="collect_wood")
    first, second = AgentCode([source]), AgentCode([source])
    try:
        steps = play(first, env, 3)
        assert len(steps) == 40 and len(set(steps)) > 2
        assert play(second, CrafterEnv(task="collect_wood"), 3) == steps  # another process, a fresh env
        assert play(first, CrafterEnv(task="collect_wood"), 3) == steps  # the same process, again
        assert play(first, env, 3) != steps  # the env's next episode: the stream's next helper seed
    finally:
        first.close()
        second.close()
