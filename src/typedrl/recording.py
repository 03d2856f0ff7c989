"""Record what an evaluation plays: per-episode statistics and videos of rendered episodes.

- :class:`EpisodeRecorder` wraps a vector env and keeps the return and length
  of every episode each row finishes, in order, so that statistics the
  evaluator does not report (length spread) come from the same episodes.
- :func:`record_video` plays deterministic episodes of a built-in torch env
  or of a Gymnasium env that renders ``rgb_array`` frames, through
  :class:`~typedrl.evaluation.EpisodeEvaluator`, and writes them as an MP4
  (needs ``pip install 'typedrl[video]'``).

Example:
    >>> import torch
    >>> from typedrl.evaluation import EpisodeEvaluator
    >>> from typedrl.testing import ConstantPolicy, CountingVecEnv
    >>> env = EpisodeRecorder(CountingVecEnv(num_envs=2, truncate_after=3))
    >>> result = EpisodeEvaluator(env, num_episodes=4).evaluate(ConstantPolicy(torch.zeros(1)))
    >>> env.first_lengths(2).tolist()
    [3.0, 3.0, 3.0, 3.0]
"""

import importlib
import importlib.util
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from typedrl._results import StepResult
from typedrl._validation import describe
from typedrl.envs import GymnasiumVecEnv, make
from typedrl.envs._make import BUILTIN_PREFIX
from typedrl.envs._wrapper import VecEnvWrapper
from typedrl.envs.builtin import BaseTorchVecEnv
from typedrl.errors import CheckpointError, ConfigError, EnvContractError, MissingDependencyError
from typedrl.evaluation import EpisodeEvaluator
from typedrl.protocols import Policy, VecEnv
from typedrl.types import Action, Obs

__all__ = ["VIDEO_EXTRA", "EpisodeRecorder", "VideoResult", "record_video", "require_video_writer"]

VIDEO_EXTRA = "pip install 'typedrl[video]'"
"""How to install what :func:`record_video` needs."""

_VIDEO_MODULES = ("imageio", "imageio_ffmpeg")


@final
class EpisodeRecorder(VecEnvWrapper):
    """Keeps the return and length of every episode each row of ``env`` finishes.

    Ghost transitions (``valid == False``) count for nothing, as in
    :class:`~typedrl.evaluation.EpisodeEvaluator`; a ``reset`` starts the
    record afresh.

    Around a checkpointable env its ``state_dict`` holds the record too (the
    finished episodes and the running ones' sums, under ``"wrapper"``, next to
    the env's state under ``"env"``): a resumed run records the episodes that
    span the resume whole, as an uninterrupted one does.

    Args:
        env: The env to watch.
    """

    def __init__(self, env: VecEnv) -> None:
        super().__init__(env)
        self._returns: list[list[float]] = []
        self._lengths: list[list[int]] = []
        self._running = torch.zeros(0, dtype=torch.float64)
        self._steps = torch.zeros(0, dtype=torch.int64)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset the env and forget every recorded episode."""
        obs, info = self.env.reset(seed=seed, options=options)
        rows = self.env.num_envs
        self._returns = [[] for _ in range(rows)]
        self._lengths = [[] for _ in range(rows)]
        self._running = torch.zeros(rows, dtype=torch.float64)
        self._steps = torch.zeros(rows, dtype=torch.int64)
        return obs, info

    def step(self, action: Action) -> StepResult:
        """Step the env and record the rows whose episode ended."""
        result = self.env.step(action)
        valid = result.valid.cpu()
        reward = result.reward.detach().to("cpu", torch.float64)
        self._running += torch.where(valid, reward, 0.0)
        self._steps += valid.to(torch.int64)
        ended = (result.done.cpu() & valid).nonzero().flatten().tolist()
        for row in ended:
            self._returns[row].append(float(self._running[row]))
            self._lengths[row].append(int(self._steps[row]))
        done = result.done.cpu()
        self._running = torch.where(done, 0.0, self._running)
        self._steps = torch.where(done, 0, self._steps)
        return result

    def wrapper_state_dict(self) -> dict[str, Any]:
        """The finished episodes' returns and lengths, and the running episodes' sums."""
        return {
            "returns": self.returns,
            "lengths": self.lengths,
            "running": self._running.clone(),
            "steps": self._steps.clone(),
        }

    def load_wrapper_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`wrapper_state_dict`'s output.

        Raises:
            CheckpointError: A key is missing or unexpected, or a value is not
                one entry per row of the expected type.
        """
        owner = "EpisodeRecorder.load_state_dict"
        expected = ["lengths", "returns", "running", "steps"]
        if sorted(state_dict) != expected:
            raise CheckpointError(
                f"{owner}: expected keys {expected} under 'wrapper', got {sorted(state_dict)}"
            )
        rows = self.env.num_envs
        for key, dtype in (("running", torch.float64), ("steps", torch.int64)):
            value = state_dict[key]
            if not (isinstance(value, Tensor) and value.dtype == dtype and value.ndim == 1):
                raise CheckpointError(
                    f"{owner}: {key!r} must be a 1-D {dtype} tensor, got {describe(value)}"
                )
        for key, kind in (("returns", float), ("lengths", int)):
            value = state_dict[key]
            if not (
                isinstance(value, list)
                and all(
                    isinstance(row, list) and all(type(item) is kind for item in row)
                    for row in value
                )
            ):
                raise CheckpointError(
                    f"{owner}: {key!r} must be a list of lists of {kind.__name__}, one per "
                    f"row, got {describe(value)}"
                )
        counts = {key: len(state_dict[key]) for key in expected}
        sizes = set(counts.values())
        if len(sizes) != 1 or not sizes <= {0, rows}:
            raise CheckpointError(
                f"{owner}: expected {rows} rows (one per env row, or 0 before the first "
                f"reset) in every entry, got {counts}"
            )
        self._returns = [list(row) for row in state_dict["returns"]]
        self._lengths = [list(row) for row in state_dict["lengths"]]
        self._running = state_dict["running"].clone()
        self._steps = state_dict["steps"].clone()

    @property
    def returns(self) -> list[list[float]]:
        """Per row, the returns of its finished episodes in the order they ended."""
        return [list(row) for row in self._returns]

    @property
    def lengths(self) -> list[list[int]]:
        """Per row, the lengths (valid steps) of its finished episodes in order."""
        return [list(row) for row in self._lengths]

    def first_lengths(self, per_row: int) -> Float[Tensor, " episodes"]:
        """The lengths of the first ``per_row`` episodes of every row, row after row.

        These are the episodes an :class:`~typedrl.evaluation.EpisodeEvaluator`
        scores when its ``num_episodes`` is ``per_row * num_envs``.

        Raises:
            EnvContractError: A row finished fewer than ``per_row`` episodes.
        """
        short = [row for row, lengths in enumerate(self._lengths) if len(lengths) < per_row]
        if short or not self._lengths:
            raise EnvContractError(
                f"EpisodeRecorder: rows {short or 'all'} finished fewer than {per_row} "
                "episodes; play them to the end first"
            )
        return torch.tensor(
            [length for lengths in self._lengths for length in lengths[:per_row]],
            dtype=torch.float64,
        )


_Frame = np.ndarray[Any, np.dtype[np.uint8]]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class _FrameSource:
    """How to draw row 0 of the env a :class:`_FrameRecorder` watches."""

    current: Callable[[], object]
    """Row 0 as it is now (after a reset or a step)."""

    final: Callable[[StepResult], object] | None
    """Row 0's terminal state, from the step that ended its episode (``None``: not drawn)."""

    fps: float
    """The env's own frame rate."""


@final
class _FrameRecorder(VecEnvWrapper):
    """Renders row 0 after every reset and step, up to the end of ``episodes`` episodes.

    The step that ends an episode adds the terminal frame where the source can
    draw it (then every episode gives its length + 1 frames), and the first
    frame of the next episode while more are to be recorded.
    """

    def __init__(self, env: VecEnv, *, source: _FrameSource, episodes: int) -> None:
        super().__init__(env)
        self._source = source
        self._episodes = episodes
        self._ended = 0
        self.frames: list[_Frame] = []

    def _keep(self, rendered: object) -> None:
        frame = rendered[0] if isinstance(rendered, tuple | list) and rendered else rendered
        array = np.asarray(frame)
        if array.ndim != 3 or array.shape[2] not in (3, 4):
            raise EnvContractError(
                f"record_video: the env rendered {type(frame).__name__} of shape "
                f"{list(array.shape)}; expected rgb_array frames of shape [height, width, 3]"
            )
        # H.264 in yuv420p needs even sides: drop an odd last row or column.
        height, width = array.shape[0] // 2 * 2, array.shape[1] // 2 * 2
        self.frames.append(np.ascontiguousarray(array[:height, :width, :3], dtype=np.uint8))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset the env and render its first frame."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.frames.clear()
        self._ended = 0
        self._keep(self._source.current())
        return obs, info

    def step(self, action: Action) -> StepResult:
        """Step the env; render while the recorded episodes last."""
        result = self.env.step(action)
        if self._ended < self._episodes:
            ended = bool(result.done[0] & result.valid[0])
            if ended and self._source.final is not None:
                self._keep(self._source.final(result))
            self._ended += int(ended)
            if self._ended < self._episodes:
                self._keep(self._source.current())
        return result


def _builtin_source(env: BaseTorchVecEnv, env_id: str) -> _FrameSource:
    """Frames of a built-in env: its current state, and each episode's terminal state."""
    if not env.renders:
        raise ConfigError(
            f"record_video: {env_id!r} is a {type(env).__name__}, which does not render; "
            "record a built-in env that renders or a Gymnasium env that renders rgb_array frames"
        )

    def final(result: StepResult) -> object:
        # A built-in env always returns its terminal observations.
        return env.render(0, obs=result.final_obs)

    return _FrameSource(current=lambda: env.render(0), final=final, fps=env.render_fps)


def _gymnasium_source(env: GymnasiumVecEnv, env_id: str) -> _FrameSource:
    """Frames of a Gymnasium env's ``rgb_array`` rendering (autoreset hides terminal states)."""
    modes = env.env.metadata.get("render_modes", [])
    if "rgb_array" not in modes:
        raise ConfigError(f"record_video: {env_id!r} renders {list(modes)}, not 'rgb_array'")
    fps = float(env.env.metadata.get("render_fps") or 30)
    return _FrameSource(current=env.env.render, final=None, fps=fps)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class VideoResult:
    """What :func:`record_video` wrote."""

    path: Path
    """The MP4 file."""

    frames: int
    """Frames written."""

    fps: float
    """Frames per second of the video."""

    @property
    def seconds(self) -> float:
        """Length of the video in seconds."""
        return self.frames / self.fps


def require_video_writer() -> None:
    """Check that the MP4 writer :func:`record_video` uses is installed.

    Raises:
        MissingDependencyError: ``imageio`` or ``imageio-ffmpeg`` is missing;
            the message says how to install them.
    """
    missing = [name for name in _VIDEO_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingDependencyError(
            f"writing MP4 videos needs {' and '.join(missing)}: {VIDEO_EXTRA}"
        )


def record_video(
    policy: Policy,
    env_id: str,
    *,
    path: str | Path,
    episodes: int = 1,
    seed: int = 0,
    fps: float | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    wrappers: Sequence[str] = (),
    clip_actions: bool | None = None,
) -> VideoResult:
    """Play ``episodes`` deterministic episodes of ``env_id`` and write them as an MP4.

    The env is built with one row: a built-in torch env (``"typedrl/..."``)
    as it is, drawn by :meth:`~typedrl.envs.BaseTorchVecEnv.render`;
    any other env with ``render_mode="rgb_array"``, drawn by Gymnasium's
    ``render()``. The episodes are played by
    :class:`~typedrl.evaluation.EpisodeEvaluator` (deterministic actions,
    reset with ``seed``), and row 0 is rendered after the reset and after
    every step to the end of the last episode. A built-in env also draws the
    terminal state of each episode (from the step's ``final_obs``), so an
    episode of ``n`` steps gives ``n + 1`` frames; a Gymnasium env has
    already reset when it could render it, so its episodes give ``n`` frames.
    Frames are written with imageio's FFmpeg plugin, whose binary ships with
    ``imageio-ffmpeg`` (no system FFmpeg needed).

    Args:
        policy: The policy to play (on the CPU).
        env_id: A built-in env id (``"typedrl/Pendulum-v0"``) or a Gymnasium
            id whose env renders ``rgb_array`` frames.
        path: The ``.mp4`` file to write (its folder is created).
        episodes: Episodes to record.
        seed: Reset seed.
        fps: Frames per second; default the env's: a built-in env's
            :attr:`~typedrl.envs.BaseTorchVecEnv.render_fps` (real
            time, one frame per step), a Gymnasium env's metadata
            ``render_fps``, else 30.
        env_kwargs: Further keyword arguments of the env's constructor.
        wrappers: Gymnasium wrappers of the single env, by name (see
            :func:`~typedrl.envs.make`).
        clip_actions: Clip ``Box`` actions to the bounds (``None``: the env's rule).

    Returns:
        The file, its number of frames and frame rate.

    Raises:
        ConfigError: ``path`` is not an ``.mp4`` file, ``episodes`` is not
            positive, ``fps`` is not a positive number, or the env cannot
            render: a built-in env without a picture (such as
            :class:`~typedrl.envs.mujoco.MujocoVecEnv`), a Gymnasium env
            without ``rgb_array`` rendering, or any other kind of env. It is
            raised before any episode is played.
        MissingDependencyError: ``imageio`` or ``imageio-ffmpeg`` is missing.
    """
    target = Path(path)
    if target.suffix.lower() != ".mp4":
        raise ConfigError(
            f"record_video writes an MP4 file; expected a path ending in .mp4, got {target}"
        )
    if episodes < 1:
        raise ConfigError(f"record_video episodes must be a positive int, got {episodes!r}")
    if fps is not None and not (math.isfinite(fps) and fps > 0):
        raise ConfigError(f"record_video fps must be a positive number, got {fps!r}")
    require_video_writer()
    builtin = env_id.startswith(BUILTIN_PREFIX)
    kwargs = dict(env_kwargs or {})
    try:
        env = make(
            env_id,
            num_envs=1,
            seed=seed,
            wrappers=wrappers,
            clip_actions=clip_actions,
            env_kwargs=kwargs if builtin else {**kwargs, "render_mode": "rgb_array"},
        )
    except (ConfigError, TypeError) as error:
        if builtin:
            raise
        raise ConfigError(
            f"record_video: cannot build {env_id!r} with render_mode='rgb_array' ({error}); "
            "only built-in envs and Gymnasium envs that render rgb_array frames can be recorded"
        ) from error
    try:
        if isinstance(env, BaseTorchVecEnv):
            source = _builtin_source(env, env_id)
        elif isinstance(env, GymnasiumVecEnv):
            source = _gymnasium_source(env, env_id)
        else:
            raise ConfigError(
                f"record_video needs a built-in env or a Gymnasium env that renders rgb_array "
                f"frames; {env_id!r} is a {type(env).__name__}, which does not render"
            )
    except ConfigError:
        env.close()
        raise
    rate = float(fps if fps is not None else source.fps)
    recorder = _FrameRecorder(env, source=source, episodes=episodes)
    try:
        EpisodeEvaluator(recorder, num_episodes=episodes, seed=seed).evaluate(policy)
    finally:
        recorder.close()
    target.parent.mkdir(parents=True, exist_ok=True)
    imageio: Any = importlib.import_module("imageio.v2")
    writer = imageio.get_writer(
        str(target), format="FFMPEG", fps=rate, codec="libx264", macro_block_size=1
    )
    try:
        for frame in recorder.frames:
            writer.append_data(frame)
    finally:
        writer.close()
    return VideoResult(path=target, frames=len(recorder.frames), fps=rate)
