"""The trust boundary for agent-written code. Every path that runs such code goes through `AgentCode`.

Trusted side (this process): `AgentCode` (sandbox.host), the protocol (sandbox.wire), the launcher
(sandbox.launch) and the lint (sandbox.lint). Untrusted side (a separate, confined process):
sandbox.child, sandbox.confine, sandbox.loader, sandbox.namespace. docs/security.md has the threat model.
"""

from sandbox.host import AgentCode, CodeRejected, SandboxLimits, SandboxUnavailable
from sandbox.lint import ALLOWED_MODULES, UnsafeCodeError, check_source, checker_disabled, find_violations

__all__ = [
    "ALLOWED_MODULES", "AgentCode", "CodeRejected", "SandboxLimits", "SandboxUnavailable", "UnsafeCodeError",
    "check_source", "checker_disabled", "find_violations",
]
