"""Videos of play: a GIF of a held-out episode, each frame captioned with the skill and the coded action
being played, and a JSON sidecar that says what the file shows.

A video is made from an `envs.replay.EpisodeRecord` that the final held-out evaluation kept
(`nodes.executor.evaluate_chain`, result key `replays`): the episode's seed and primitive actions, and
for each step the skill of the chain and the coded action the trusted side was running. This process
replays those actions on a fresh Crafter env with the same seed (`envs.replay.replay`) and draws the
frames itself. Agent code never runs here or again: its choices were made in the sandbox during the
evaluation; only the trusted simulator steps, and only on seeds the evaluation already played.
Replay steps are not counted toward any budget (they are neither training nor evaluation).

Frames: every k-th state, k being the stride: the states 0, k, 2k, ... before the episode's last step,
then the last state, so an episode of n steps gives ceil(n / k) + 1 frames (1 for n = 0). A frame at
state t shows the world before step t is played and is captioned with what plays step t (skill, coded
action, primitive action); the last frame says how the episode ended. Frames are FRAME_SIZE pixels wide;
k starts at ceil(n / MAX_FRAMES) and doubles until the GIF is at most MAX_BYTES. The stride, the frame
count and the caption of every frame are in the sidecar (and the stride, frame count, steps and seed
in the GIF's comment).

`write_run_videos` writes the two videos of a `graph.run` run into RUN_DIR/videos/: final_chain.gif
(the first held-out episode) and furthest.gif (the episode that passed the most chain steps).
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from envs.replay import EpisodeRecord

VIDEO_DIR = "videos"
MAX_BYTES = 2_000_000        # every GIF stays under 2 MB
MAX_FRAMES = 400             # the first stride tried: at most this many frames
FRAME_SIZE = 192             # pixels a side of the game picture (Crafter's own render is 64)
FRAME_MS = 125               # 8 frames a second; the last frame stays LAST_FRAME_MS
LAST_FRAME_MS = 2_000
FONT_SIZE = 12
LINE_PX = 15
# the two videos of a run: file name, which recorded episode, what it shows
RUN_VIDEOS = (("final_chain", "first", "the final skill chain on the first held-out episode"),
              ("furthest", "furthest", "the held-out episode where the final skill chain got furthest"))

Warn = Callable[[str], None]


class VideoError(RuntimeError):
    """A video could not be made (the replay did not match, or no stride fits the size limit)."""


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def frame_steps(steps: int, stride: int) -> list[int]:
    """The states filmed at `stride`: 0, k, 2k, ... below `steps`, then `steps` (the last state)."""
    if stride < 1 or steps < 0:
        raise ValueError(f"stride must be >= 1 and steps >= 0, got {stride} and {steps}")
    return list(range(0, steps, stride)) + [steps]


def caption(record: EpisodeRecord, t: int, outcome: str = "") -> tuple[str, str, str]:
    """The three caption lines of state t: the skill, the coded action playing step t, the step itself."""
    if t < record.steps:
        skill, action = record.label_at(t)
        return skill or "-", action or "-", f"step {t}/{record.steps}: {record.action_names[record.actions[t]]}"
    skill, _ = record.label_at(t - 1) if t else ("", "")
    return skill or "-", f"end: {outcome}" if outcome else "end", f"step {t}/{record.steps}"


def caption_text(lines: tuple[str, str, str]) -> str:
    """A frame's caption as the sidecar lists it: 'skill: coded action'."""
    return f"{lines[0]}: {lines[1]}"


def _font(size: int = FONT_SIZE):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)  # a scalable font when Pillow has FreeType
    except (TypeError, OSError, ImportError):  # an older Pillow or no FreeType: the small bitmap font
        return ImageFont.load_default()


def _fit(text: str, font, width: int) -> str:
    """`text`, cut with '...' to fit `width` pixels."""
    if font.getlength(text) <= width:
        return text
    while text and font.getlength(text + "...") > width:
        text = text[:-1]
    return text + "..."


def _picture(pixels, lines: tuple[str, str, str], font):
    """The game picture with its caption bar underneath, as a PIL image."""
    from PIL import Image, ImageDraw

    game = Image.fromarray(pixels)
    width = game.width
    bar = 3 * LINE_PX + 6
    image = Image.new("RGB", (width, game.height + bar), (16, 16, 16))
    image.paste(game, (0, 0))
    draw = ImageDraw.Draw(image)
    for i, (text, color) in enumerate(zip(lines, ((255, 255, 255), (255, 220, 90), (170, 170, 170)))):
        draw.text((4, game.height + 3 + i * LINE_PX), _fit(text, font, width - 8), fill=color, font=font)
    return image


def _outcome(record: EpisodeRecord, env) -> str:
    if record.success:
        return "task done"
    if env.game.health <= 0:
        return "died"
    if record.steps >= record.max_steps:
        return "out of steps"
    return f"chain stopped after {record.reached} of {record.chain_length} skills"


def render(record: EpisodeRecord, stride: int, size: int = FRAME_SIZE) -> dict[str, Any]:
    """Replay `record` and draw the states filmed at `stride`: images, steps, caption lines, outcome."""
    from envs.replay import replay

    wanted = set(frame_steps(record.steps, stride))
    pixels: dict[int, Any] = {}
    ending: dict[str, str] = {}

    def film(t: int, env) -> None:
        if t in wanted:
            pixels[t] = env.frame(size)
        if t == record.steps:
            ending["outcome"] = _outcome(record, env)

    end = replay(record, film)
    if not end.matches:
        raise VideoError(f"the replay of seed {record.seed} ended with achievements {end.achievements}, the "
                         f"recorded episode with {record.achievements}: it is not the same episode")
    font = _font()
    steps = sorted(pixels)
    lines = [caption(record, t, ending["outcome"]) for t in steps]
    return {"steps": steps, "lines": lines, "outcome": ending["outcome"],
            "images": [_picture(pixels[t], line, font) for t, line in zip(steps, lines)]}


def _one_palette(images: list, samples: int = 40) -> list:
    """The images in one 256-colour palette drawn from up to `samples` of them, without dithering: the GIF then
    stores only what changed between frames, about half the bytes of a palette per frame (and faster)."""
    from PIL import Image

    sample = images[::max(1, len(images) // samples)][:samples]
    montage = Image.new("RGB", (sample[0].width, sample[0].height * len(sample)))
    for i, image in enumerate(sample):
        montage.paste(image, (0, i * image.height))
    palette = montage.quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    return [image.quantize(palette=palette, dither=Image.Dither.NONE) for image in images]


def _encode(images: list, comment: str) -> bytes:
    durations = [FRAME_MS] * (len(images) - 1) + [LAST_FRAME_MS]
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], duration=durations, loop=0,
                   comment=comment.encode())
    return buffer.getvalue()


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)  # readable like the run's other files (mkstemp makes it private)
    os.replace(tmp, path)


def sidecar_path(gif: Path) -> Path:
    return gif.with_suffix(".json")


def write_video(record: EpisodeRecord, path: str | Path, *, title: str = "", episode: str = "",
                max_bytes: int = MAX_BYTES, size: int = FRAME_SIZE, max_frames: int = MAX_FRAMES) -> dict[str, Any]:
    """Write `record` as the GIF `path` and its sidecar (same name, .json); returns the sidecar's data."""
    path = Path(path)
    stride = max(1, math.ceil(record.steps / max(max_frames - 1, 1)))
    drawn = render(record, stride, size)
    drawn["images"] = _one_palette(drawn["images"])
    while True:
        keep = [i for i, t in enumerate(drawn["steps"]) if t % stride == 0 or t == record.steps]
        steps = [drawn["steps"][i] for i in keep]
        comment = json.dumps({"stride": stride, "frames": len(keep), "episode_steps": record.steps,
                              "seed": record.seed})
        data = _encode([drawn["images"][i] for i in keep], comment)
        if len(data) <= max_bytes:
            break
        if len(keep) <= 2:
            raise VideoError(f"two frames already take {len(data):,} bytes, over the {max_bytes:,}-byte limit")
        stride *= 2  # the frames of the doubled stride are among those drawn
    info = {"file": path.name, "title": title, "episode": episode, "task": record.task, "seed": record.seed,
            "stride": stride, "frames": len(keep), "episode_steps": record.steps, "bytes": len(data),
            "frame_size": list(drawn["images"][0].size), "fps": round(1000 / FRAME_MS, 2),
            "success": record.success, "outcome": drawn["outcome"], "achievements": record.achievements,
            "chain_steps_passed": record.reached, "chain_length": record.chain_length,
            "frame_steps": steps, "captions": [caption_text(drawn["lines"][i]) for i in keep],
            "digest": record.digest(),
            "how": "replayed from the recorded primitive actions on a fresh Crafter env with the same held-out "
                   "seed; every stride-th state is a frame, then the last state"}
    _write_atomic(path, data)
    _write_atomic(sidecar_path(path), (json.dumps(info, indent=1) + "\n").encode())
    return info


def video_is_current(path: Path, record: EpisodeRecord) -> bool:
    """Whether `path` and its sidecar already show `record` (same digest): then nothing needs drawing."""
    try:
        info = json.loads(sidecar_path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return path.is_file() and info.get("digest") == record.digest()


def write_run_videos(evaluation: Mapping[str, Any] | None, run_dir: str | Path, warn: Warn = _warn) -> list[Path]:
    """The videos of a run (RUN_VIDEOS) into run_dir/videos/. A video that cannot be made costs one warning
    line, never the run. A video already showing the same episode is kept as it is."""
    replays = (evaluation or {}).get("replays") or {}
    if not replays:
        warn("note: no video of play: the final evaluation recorded no episode")
        return []
    written: list[Path] = []
    for name, which, title in RUN_VIDEOS:
        path = Path(run_dir) / VIDEO_DIR / f"{name}.gif"
        try:
            record = EpisodeRecord.from_json(replays[which])
            same = next((p for p in written if video_is_current(p, record)), None)
            if same is not None and not video_is_current(path, record):  # one episode, two names: copy it
                info = json.loads(sidecar_path(same).read_text(encoding="utf-8"))
                info.update(file=path.name, title=title, episode=which)
                _write_atomic(path, same.read_bytes())
                _write_atomic(sidecar_path(path), (json.dumps(info, indent=1) + "\n").encode())
            elif not video_is_current(path, record):
                write_video(record, path, title=title, episode=which)
            written.append(path)
        except Exception as exc:  # a video is a picture of the run, never a reason to lose it
            why = (str(exc).splitlines() or [""])[0]
            warn(f"warning: no video {path}: {type(exc).__name__}: {why}")
    return written
