"""The data-only protocol across the trust boundary: length-prefixed JSON frames, read with a deadline.

Nothing that crosses the boundary is ever unpickled or evaluated: a frame is a 4-byte big-endian length
and that many bytes of UTF-8 JSON. The reader refuses a frame over its size cap and gives up at its
deadline, also in the middle of a frame, so a child that sends half a message cannot block the parent.

Observations cross as plain dicts (`obs_to_wire` / `obs_from_wire`). Text that came from the untrusted
side goes through `clean_text` where the host receives it, before anything else sees it.
"""

from __future__ import annotations

import json
import os
import re
import select
import struct
import time
import unicodedata
from typing import Any

import numpy as np

from envs.observation import VIEW_HEIGHT, VIEW_WIDTH, PlayerObservation

HEADER = struct.Struct(">I")
MAX_FROM_CHILD = 1 << 20      # a reply, a print line or an error: far below this when honest
MAX_TO_CHILD = 16 << 20       # sources (<= 100,000 chars each) and a full game-state sync
REPORT_TEXT_CAP = 4096        # what one error or trace may put in front of a model


class ProtocolError(Exception):
    """The other side broke the protocol: oversized, malformed or late (`timed_out`) message, or it left."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"a message that is not JSON ({type(exc).__name__})") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"a message that is not a JSON object ({type(message).__name__})")
    return message


class FrameReader:
    """Reads frames from a file descriptor with a deadline on every read and a cap on every frame."""

    def __init__(self, fd: int, max_bytes: int):
        self.fd = fd
        self.max_bytes = max_bytes
        self.frames = 0      # frames handed out so far, and their bytes (headers included): the host caps
        self.received = 0    # what one request may send with these
        self._buffer = bytearray()

    @property
    def bytes_read(self) -> int:
        """Every byte read, partial frames included: whether the other side is talking."""
        return self.received + len(self._buffer)

    def read(self, deadline: float | None) -> dict[str, Any]:
        """The next frame; `deadline` is a time.monotonic() value (None: wait as long as it takes)."""
        size = None
        while True:
            if size is None and len(self._buffer) >= HEADER.size:
                (size,) = HEADER.unpack_from(self._buffer)
                if size > self.max_bytes:
                    raise ProtocolError(f"a message of {size:,} bytes, over the cap of {self.max_bytes:,}")
            if size is not None and len(self._buffer) >= HEADER.size + size:
                body = bytes(self._buffer[HEADER.size:HEADER.size + size])
                del self._buffer[:HEADER.size + size]
                self.frames += 1
                self.received += HEADER.size + size
                return decode(body)
            self._fill(deadline)

    def _fill(self, deadline: float | None) -> None:
        """Read what is there; with a deadline the fd is non-blocking and select waits when nothing is.
        The deadline is checked before every read, not only when the pipe is empty: a writer that keeps
        the pipe full cannot hold the reader past it."""
        if deadline is not None and time.monotonic() >= deadline:
            raise ProtocolError("no answer before the deadline", timed_out=True)
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            left = max(0.0, deadline - time.monotonic()) if deadline is not None else None
            if not select.select([self.fd], [], [], left)[0]:
                raise ProtocolError("no answer before the deadline", timed_out=True) from None
            return
        except OSError as exc:
            raise ProtocolError(f"the channel broke ({exc})") from None
        if not chunk:
            raise ProtocolError("the other side closed the channel")
        self._buffer += chunk


def write_frame(fd: int, message: dict[str, Any], deadline: float | None = None) -> None:
    """Write one frame; with a deadline the fd must be non-blocking, and a reader that stops reading
    cannot hold the writer past it."""
    data = memoryview(encode(message))
    while data:
        try:
            written = os.write(fd, data)
        except BlockingIOError:  # the pipe is full: wait until it drains, up to the deadline
            left = max(0.0, deadline - time.monotonic()) if deadline is not None else None
            if not select.select([], [fd], [], left)[1]:
                raise ProtocolError("the other side stopped reading", timed_out=True) from None
            continue
        except OSError as exc:
            raise ProtocolError(f"the channel broke ({exc})") from None
        data = data[written:]


# ---- observations ---------------------------------------------------------------------------

def obs_to_wire(obs: PlayerObservation) -> dict[str, Any]:
    return {"m": obs.materials.astype(np.uint8).tobytes().hex(), "c": [list(c) for c in obs.creatures],
            "i": dict(obs.inventory), "f": list(obs.facing), "p": list(obs.pos), "d": float(obs.daylight),
            "s": bool(obs.sleeping), "t": int(obs.episode_step), "a": sorted(obs.achievements)}


def obs_from_wire(data: dict[str, Any]) -> PlayerObservation:
    """The sandbox's side: the data comes from the trusted host, already of the right types, so it is taken as
    it is (this runs once per step of every coded action)."""
    materials = np.frombuffer(bytes.fromhex(data["m"]), dtype=np.uint8).reshape(VIEW_WIDTH, VIEW_HEIGHT).copy()
    return PlayerObservation(
        materials=materials, creatures=tuple(map(tuple, data["c"])), inventory=data["i"],
        facing=tuple(data["f"]), pos=tuple(data["p"]), daylight=data["d"], sleeping=data["s"],
        episode_step=data["t"], achievements=frozenset(data["a"]))


# ---- text from the untrusted side -----------------------------------------------------------

# Every string the sandbox process sends goes through `clean_text` once, where sandbox.host receives it;
# after that it is safe to encode, serialise, checkpoint and put in front of a model or a terminal.

PLACEHOLDER = "?"             # stands where a character was taken out: visible, and plain ASCII
CONTINUATION = "| "           # starts every further line of the sandbox's text; no line of the harness does
# C0 and C1 control characters (ANSI/OSC escapes start with ESC or CSI), except tab and newline.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Beyond ASCII: controls, format characters (bidi overrides, zero-width), lone surrogates (they cannot
# be encoded: UTF-8, JSON and the model client raise), private-use and unassigned code points, and the
# line and paragraph separators (a line break to str.splitlines and to some readers).
_ODD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_UNMARKED_LINE = re.compile("\n(?!" + re.escape(CONTINUATION) + ")")


def scrub(text: str) -> str:
    """`text` with every odd character (above) replaced by PLACEHOLDER, one for one; tab and newline stay."""
    if text.isascii():
        return _CONTROL.sub(PLACEHOLDER, text)
    return "".join(PLACEHOLDER if c not in "\t\n" and unicodedata.category(c) in _ODD_CATEGORIES else c
                    for c in text)


def mark_lines(text: str) -> str:
    """Every line after the first starts with CONTINUATION, so that the text cannot pose as lines of the
    report around it (`task success: True`, a section header). Idempotent."""
    return _UNMARKED_LINE.sub("\n" + CONTINUATION, text) if "\n" in text else text


def clean_text(value: Any, cap: int = REPORT_TEXT_CAP, *, mark: bool = True) -> str:
    """A string fit for a model, a terminal, JSON and a checkpoint: odd characters replaced (`scrub`),
    its further lines marked (`mark_lines`; mark=False for the harness's own text that quotes agent text
    on single lines, such as the lint's), at most `cap` characters with the cut marked in the middle (the
    start names the error, the end holds the last events). Idempotent, so cleaning again only caps."""
    text = value if isinstance(value, str) else repr(value)
    dropped = 0
    if len(text) > 2 * cap:  # the cut keeps less than `cap` characters of either end: scrub no more
        dropped, text = len(text) - 2 * cap, text[:cap] + text[-cap:]
    text = scrub(text)
    if mark:
        text = mark_lines(text)
    if len(text) <= cap and not dropped:
        return text
    # the marker takes a marked line of its own, and the rest of a line cut in two goes on it: nothing
    # after the cut can start a line unmarked, and cleaning the result again changes nothing
    size = len(_cut_marker(len(text) + dropped))
    keep = max(0, cap - size)
    head, tail = text[:keep // 2], text[len(text) - (keep - keep // 2):] if keep else ""
    head = head.removesuffix("\n" + CONTINUATION[0]).removesuffix("\n")  # no half-marked or empty last line
    return head + _cut_marker(len(text) + dropped - len(head) - len(tail)) + tail


def _cut_marker(count: int) -> str:
    return f"\n{CONTINUATION}[... {count:,} characters cut ...] "
