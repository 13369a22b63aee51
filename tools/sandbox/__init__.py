"""Sandbox for untrusted, agent-written code: static check, restricted namespace, limited process.

Public API (docs/CONTRACTS.md): `check_source`, `UnsafeCodeError`, `load_coded_actions`,
`CodeLoadError`, `run_sandboxed`, `SandboxLimits`, `SandboxResult`.
"""

from tools.sandbox.checker import ALLOWED_MODULES, UnsafeCodeError, check_source, find_violations
from tools.sandbox.limits import SandboxLimits
from tools.sandbox.loader import load_coded_actions
from tools.sandbox.namespace import CodeLoadError
from tools.sandbox.runner import SandboxResult, run_sandboxed

__all__ = [
    "ALLOWED_MODULES", "CodeLoadError", "SandboxLimits", "SandboxResult", "UnsafeCodeError",
    "check_source", "find_violations", "load_coded_actions", "run_sandboxed",
]
