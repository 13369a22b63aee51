"""The plugin registry: tools and nodes registered in code or through the `rlgpt.plugins`
entry-point group, with clear errors that name a broken plugin."""

import importlib.metadata
import sys
import textwrap

import pytest
from langchain_core.tools import BaseTool, tool

from graph import plugins
from graph.plugins import PluginError, load_plugins, register_node, register_tool


@pytest.fixture(autouse=True)
def clean_registry():
    plugins.clear()
    yield
    plugins.clear()


def test_register_tool_and_node_in_code():
    @register_tool
    @tool
    def count_wood(n: int) -> str:
        """Say how much wood."""
        return f"{n} wood"

    def plain(x: int) -> int:
        """Double a number."""
        return 2 * x

    wrapped = register_tool(plain)
    assert isinstance(wrapped, BaseTool) and wrapped.invoke({"x": 3}) == 6

    @register_node("audit", after="critic", description="writes nothing")
    def audit(state):
        return {}

    register_node("logger", lambda state, config: {}, after="fast")
    got = load_plugins(entry_points=False)
    assert got.tool_names() == ["count_wood", "plain"]
    assert [(n.name, n.after) for n in got.nodes] == [("audit", "critic"), ("logger", "fast")]
    assert got.nodes[0].fn is audit and got.nodes[0].description == "writes nothing"
    # a snapshot: later registrations do not change what a built graph got
    register_node("late", lambda s: {}, after="critic")
    assert len(got.nodes) == 2


def test_bad_registrations_are_refused():
    with pytest.raises(PluginError, match="identifier"):
        register_node("bad name", lambda s: {}, after="critic")
    with pytest.raises(PluginError, match="'after'"):
        register_node("ok", lambda s: {}, after="")
    with pytest.raises(PluginError, match="callable"):
        register_node("ok", 42, after="critic")
    with pytest.raises(PluginError, match="3 required"):
        register_node("ok", lambda a, b, c: {}, after="critic")
    with pytest.raises(PluginError, match="docstring"):
        register_tool(lambda x: x)
    register_node("dup", lambda s: {}, after="critic")
    with pytest.raises(PluginError, match="already registered"):
        register_node("dup", lambda s: {}, after="slow")
    assert plugins.unregister("dup") and not plugins.unregister("dup")


def _fake_entry_points(monkeypatch, tmp_path, module_source, value):
    (tmp_path / "fake_rlgpt_plugin.py").write_text(textwrap.dedent(module_source))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("fake_rlgpt_plugin", None)
    ep = importlib.metadata.EntryPoint(name="fake", value=value, group=plugins.ENTRY_POINT_GROUP)

    def entry_points(group=None, **kw):
        return [ep] if group == plugins.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(plugins.importlib.metadata, "entry_points", entry_points)


def test_entry_point_module_and_function(monkeypatch, tmp_path):
    _fake_entry_points(monkeypatch, tmp_path, """
        from graph.plugins import register_node
        CALLS = []
        def setup():
            CALLS.append(1)
            register_node("from_ep", lambda state: {}, after="critic")
    """, "fake_rlgpt_plugin:setup")
    got = load_plugins()
    assert got.node_names() == ["from_ep"]
    load_plugins()  # loading twice does not register twice
    assert sys.modules["fake_rlgpt_plugin"].CALLS == [1]


def test_broken_entry_point_is_named(monkeypatch, tmp_path):
    _fake_entry_points(monkeypatch, tmp_path, "raise RuntimeError('boom in plugin')\n", "fake_rlgpt_plugin")
    with pytest.raises(PluginError) as e:
        load_plugins()
    assert "plugin 'fake'" in str(e.value) and "boom in plugin" in str(e.value)
    assert "rlgpt.plugins" in str(e.value)
