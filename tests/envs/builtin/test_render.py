"""Tests of the NumPy rasteriser and of the frames the built-in envs render."""

import math
from typing import Any, ClassVar, final

import numpy as np
import pytest
import torch
from torch import Tensor

from tests.envs.builtin._factories import DRIFT_LAYOUT, FACTORIES, random_actions
from typedrl.envs.builtin import BaseTorchVecEnv, CartPoleSwingUp, Pendulum
from typedrl.envs.builtin._render import Canvas, RenderView
from typedrl.errors import ConfigError, EnvContractError

ALL = list(FACTORIES)
_FPS = {
    "Pendulum": 20.0,
    "CartPole": 50.0,
    "CartPoleContinuous": 50.0,
    "CartPoleSwingUp": 50.0,
    "PointMass": 20.0,
    "Reacher": 20.0,
}
_RED = (255, 0, 0)
# 40 x 20 pixels, x in [-2, 2], y in [-1, 1]: 10 pixels per world unit.
_SMALL = RenderView(width=40, height=20, x_range=(-2.0, 2.0), control_dt=0.1)

Array = np.ndarray[Any, Any]


def _centres(view: RenderView) -> tuple[Array, Array]:
    """World coordinates of every pixel centre: ys ``[height, 1]``, xs ``[1, width]``."""
    scale = view.width / (view.x_range[1] - view.x_range[0])
    top = view.y_center + view.height / (2 * scale)
    xs = view.x_range[0] + (np.arange(view.width) + 0.5) / scale
    ys = top - (np.arange(view.height) + 0.5) / scale
    return ys[:, None], xs[None, :]


def _mask(frame: Array, color: tuple[int, int, int]) -> Array:
    """Where ``frame`` has exactly ``color``."""
    mask: Array = np.all(frame == np.asarray(color, dtype=np.uint8), axis=-1)
    return mask


def _painted(canvas: Canvas, color: tuple[int, int, int] = _RED) -> Array:
    return _mask(canvas.frame(), color)


def _centroid(mask: Array) -> tuple[float, float]:
    """Mean (row, column) of the pixels of ``mask``."""
    rows, cols = np.nonzero(mask)
    assert rows.size > 0
    return float(rows.mean()), float(cols.mean())


def _same_state(first: dict[str, Any], second: dict[str, Any]) -> bool:
    if first.keys() != second.keys():
        return False
    for key, value in first.items():
        other = second[key]
        if isinstance(value, Tensor):
            if not (isinstance(other, Tensor) and torch.equal(value, other)):
                return False
        elif value != other:
            return False
    return True


def _with_state(env: BaseTorchVecEnv, rows: list[list[float]]) -> BaseTorchVecEnv:
    """Reset ``env`` and overwrite its physical state with ``rows``."""
    env.reset(seed=0)
    saved = env.state_dict()
    saved["state"] = torch.tensor(rows, dtype=env.dtype)
    env.load_state_dict(saved)
    return env


# ------------------------------------------------------------------ RenderView


def test_render_view_scale_and_fps() -> None:
    """Square pixels: the scale follows from the width; fps is one frame per step."""
    assert _SMALL.scale == 10.0
    assert _SMALL.fps == pytest.approx(10.0)
    assert (RenderView(x_range=(0.0, 1.0), control_dt=0.5).width, _SMALL.height) == (400, 20)


# --------------------------------------------------------------------- Canvas


def test_canvas_starts_with_the_background_and_returns_copies() -> None:
    """A new canvas is the background colour; frame() copies, so edits do not reach it."""
    canvas = Canvas(_SMALL, background=(1, 2, 3))
    frame = canvas.frame()
    assert frame.shape == (20, 40, 3)
    assert frame.dtype == np.uint8
    assert (frame == np.array([1, 2, 3], dtype=np.uint8)).all()
    frame[...] = 0
    assert (canvas.frame() == np.array([1, 2, 3], dtype=np.uint8)).all()
    assert canvas.view is _SMALL


def test_world_to_pixel_orientation() -> None:
    """x grows to the right and y upwards: a shape top right lands in the top-right pixels."""
    canvas = Canvas(_SMALL)
    canvas.circle((1.5, 0.5), 0.2, color=_RED)
    rows, cols = np.nonzero(_painted(canvas))
    # World (1.5, 0.5) is pixel column (1.5 + 2) * 10 = 35, row (1 - 0.5) * 10 = 5.
    assert float(cols.mean()) == pytest.approx(35.0, abs=0.5)
    assert float(rows.mean()) == pytest.approx(5.0, abs=0.5)


@pytest.mark.parametrize("center", [(0.3, -0.2), (-1.9, 0.8), (2.1, 0.0)])
def test_circle_fills_the_pixels_within_its_radius(center: tuple[float, float]) -> None:
    """Exactly the pixels whose centres lie in the disc are filled, also at the edges."""
    canvas = Canvas(_SMALL)
    canvas.circle(center, 0.45, color=_RED)
    ys, xs = _centres(_SMALL)
    expected = (xs - center[0]) ** 2 + (ys - center[1]) ** 2 <= 0.45**2
    assert expected.any()
    np.testing.assert_array_equal(_painted(canvas), expected)


def test_segment_is_a_capsule() -> None:
    """A thick segment is the set of points within width / 2 of it: round ends, no corners."""
    canvas = Canvas(_SMALL)
    canvas.segment((-1.0, 0.0), (1.0, 0.0), width=0.8, color=_RED)
    ys, xs = _centres(_SMALL)
    # Distance to the segment from -1 to 1 on the x axis.
    distance = np.hypot(np.maximum(np.abs(xs) - 1.0, 0.0), ys)
    np.testing.assert_array_equal(_painted(canvas), distance <= 0.4)
    painted = _painted(canvas)
    # Row 1 is y = 0.85, column 31 x = 1.15: inside a rectangle, outside the round end.
    assert not painted[1, 31]
    assert painted[10, 33]


def test_slanted_and_degenerate_segments() -> None:
    """A slanted segment covers its midpoint and ends; a zero-length one is a disc."""
    canvas = Canvas(_SMALL)
    canvas.segment((-1.5, -0.8), (1.5, 0.8), width=0.3, color=_RED)
    painted = _painted(canvas)
    # Pixel centres on the segment: its midpoint (0, 0) and both ends.
    assert painted[10, 20]
    assert painted[1, 34]
    assert painted[17, 5]
    # Far from the line, above its midpoint.
    assert not painted[2, 20]
    dot = Canvas(_SMALL)
    dot.segment((0.5, 0.0), (0.5, 0.0), width=0.6, color=_RED)
    disc = Canvas(_SMALL)
    disc.circle((0.5, 0.0), 0.3, color=_RED)
    np.testing.assert_array_equal(dot.frame(), disc.frame())


def test_rectangle_is_clipped_to_the_canvas() -> None:
    """A rectangle reaching past the edges fills its part inside the canvas."""
    canvas = Canvas(_SMALL)
    canvas.rectangle((1.5, -5.0), (5.0, 0.0), color=_RED)
    expected = np.zeros((20, 40), dtype=bool)
    expected[10:, 35:] = True
    np.testing.assert_array_equal(_painted(canvas), expected)


def test_shapes_off_the_canvas_or_not_finite_draw_nothing() -> None:
    """Shapes wholly outside the canvas, or with a NaN or infinite coordinate, leave it as it is."""
    canvas = Canvas(_SMALL)
    canvas.circle((10.0, 10.0), 1.0, color=_RED)
    canvas.rectangle((-9.0, -9.0), (-3.0, -2.0), color=_RED)
    canvas.segment((3.0, 3.0), (4.0, 5.0), width=0.5, color=_RED)
    canvas.circle((math.nan, 0.0), 1.0, color=_RED)
    canvas.segment((0.0, 0.0), (math.inf, 0.0), width=0.5, color=_RED)
    canvas.rectangle((0.0, 0.0), (1.0, math.nan), color=_RED)
    assert (canvas.frame() == 255).all()


# ------------------------------------------------------------ the envs' frames


@pytest.mark.parametrize("name", ALL)
def test_frames_have_the_view_shape(name: str) -> None:
    """Every built-in renders uint8 [height, width, 3] frames of even size, not all one colour."""
    env = FACTORIES[name](num_envs=3)
    env.reset(seed=1)
    assert env.renders
    assert env.render_fps == pytest.approx(_FPS[name])
    for row in range(3):
        frame = env.render(row)
        assert frame.dtype == np.uint8
        assert frame.ndim == 3
        assert frame.shape[2] == 3
        assert frame.shape[0] % 2 == 0
        assert frame.shape[1] % 2 == 0
        assert frame.shape[:2] == (400, 600 if name.startswith("CartPole") else 400)
        assert frame.std() > 0


@pytest.mark.parametrize("name", ALL)
def test_frames_are_deterministic_and_leave_the_env_alone(name: str) -> None:
    """The same state gives the same frame; rendering changes no state and no random stream."""
    generator = torch.Generator().manual_seed(0)
    rendered, twin = FACTORIES[name](num_envs=4, seed=7), FACTORIES[name](num_envs=4, seed=7)
    rendered.reset()
    twin.reset()
    for _ in range(12):
        before = rendered.state_dict()
        first = rendered.render(1)
        np.testing.assert_array_equal(first, rendered.render(1))
        np.testing.assert_array_equal(first, twin.render(1))
        assert _same_state(before, rendered.state_dict())
        action = random_actions(rendered, generator)
        rendered.step(action)
        twin.step(action)
    assert _same_state(rendered.state_dict(), twin.state_dict())


@pytest.mark.parametrize("name", ALL)
def test_frames_of_different_rows_differ(name: str) -> None:
    """Rows with different initial states give different frames."""
    env = FACTORIES[name](num_envs=2)
    env.reset(seed=3)
    assert not np.array_equal(env.render(0), env.render(1))


def test_pendulum_rod_turns_with_the_angle() -> None:
    """theta = 0 draws the rod above the pivot, pi / 2 to its left, pi below it."""
    rod = (204, 77, 77)
    centre = 199.5
    env = _with_state(Pendulum(num_envs=3), [[0.0, 0.0], [math.pi / 2, 0.0], [math.pi, 0.0]])
    up, left, down = (_centroid(_mask(env.render(row), rod)) for row in range(3))
    # The rod reaches 1 unit (400 / 4.4 pixels) from the pivot: its centroid about half-way.
    half = 0.5 * 400 / 4.4
    assert up == pytest.approx((centre - half, centre), abs=3.0)
    assert left == pytest.approx((centre, centre - half), abs=3.0)
    assert down == pytest.approx((centre + half, centre), abs=3.0)


@pytest.mark.parametrize("name", ["CartPole", "CartPoleSwingUp"])
def test_cart_moves_with_its_position(name: str) -> None:
    """The cart is drawn at x (100 pixels per unit, x = 0 in the middle)."""
    env = FACTORIES[name](num_envs=2)
    state = [[-1.0, 0.0, 0.0, 0.0], [1.2, 0.0, 0.0, 0.0]]
    frames = [_with_state(env, state).render(row) for row in range(2)]
    for frame, x in zip(frames, (-1.0, 1.2), strict=True):
        # Rows 186-194 (y between 0.05 and 0.14) cross the cart, above the rail.
        band = _mask(frame[186:195], (0, 0, 0))
        _, column = _centroid(band)
        assert column == pytest.approx((x + 3.0) * 100 - 0.5, abs=1.0)


def test_swing_up_pole_hangs_below_the_rail() -> None:
    """theta = pi draws the pole below the rail, theta = 0 above it."""
    pole = (202, 152, 101)
    env = _with_state(CartPoleSwingUp(num_envs=2), [[0.0, 0.0, math.pi, 0.0], [0.0] * 4])
    hanging, upright = (_centroid(_mask(env.render(row), pole)) for row in range(2))
    assert hanging[0] > 230
    assert upright[0] < 170
    assert hanging[1] == pytest.approx(299.5, abs=2.0)


def test_point_mass_and_goal_positions() -> None:
    """The mass and the goal are drawn where they are (400 / 3 pixels per unit)."""
    env = _with_state(FACTORIES["PointMass"](num_envs=1), [[0.5, -0.5, 0.0, 0.0, -1.0, 1.0]])
    frame = env.render(0)
    scale = 400 / 3

    def pixel(x: float, y: float) -> tuple[float, float]:
        return (1.5 - y) * scale - 0.5, (x + 1.5) * scale - 0.5

    assert _centroid(_mask(frame, (50, 90, 200))) == pytest.approx(pixel(0.5, -0.5), abs=1.0)
    assert _centroid(_mask(frame, (60, 160, 60))) == pytest.approx(pixel(-1.0, 1.0), abs=1.0)


def test_reacher_links_follow_the_joint_angles() -> None:
    """The target is drawn at its position; the outer link points where q1 + q2 says."""
    env = _with_state(
        FACTORIES["Reacher"](num_envs=2),
        [[0.0, 0.0, 0.0, 0.0, 0.0, 0.7], [math.pi / 2, math.pi / 2, 0.0, 0.0, 0.0, 0.7]],
    )
    scale = 400 / 2.4
    stretched, bent = env.render(0), env.render(1)
    target = _centroid(_mask(stretched, (220, 50, 50)))
    assert target == pytest.approx((199.5 - 0.7 * scale, 199.5), abs=1.0)
    outer = (70, 160, 220)
    # Stretched along +x: the outer link spans x in [0.5, 1]; bent: up, then to the left.
    assert _centroid(_mask(stretched, outer)) == pytest.approx(
        (199.5, 199.5 + 0.75 * scale), abs=3.0
    )
    assert _centroid(_mask(bent, outer)) == pytest.approx(
        (199.5 - 0.5 * scale, 199.5 - 0.25 * scale), abs=3.0
    )


def test_render_in_float64_with_a_graph() -> None:
    """Float64 rows whose state carries a graph render; the graph still backpropagates."""
    env = Pendulum(num_envs=2, dtype="float64")
    env.reset(seed=0)
    torque = torch.full((2, 1), 0.5, dtype=torch.float64, requires_grad=True)
    result = env.step(torque)
    assert result.obs["obs"].requires_grad
    frame = env.render(1)
    assert frame.dtype == np.uint8
    twin = Pendulum(num_envs=2, dtype="float64")
    twin.load_state_dict(env.state_dict())
    np.testing.assert_array_equal(frame, twin.render(1))
    (result.reward.sum() + result.obs["obs"].sum()).backward()
    assert torque.grad is not None
    assert torch.isfinite(torque.grad).all()


def test_render_of_a_final_observation() -> None:
    """obs= draws a given observation: the terminal state of a row that just ended."""
    env = CartPoleSwingUp(num_envs=1, max_episode_steps=500)
    env.reset(seed=0)
    push = torch.ones(1, 1)
    result = env.step(push)
    while not bool(result.done[0]):
        result = env.step(push)
    assert result.final_obs is not None
    final = env.render(0, obs=result.final_obs)
    restarted = env.render(0)
    assert not np.array_equal(final, restarted)
    np.testing.assert_array_equal(restarted, env.render(0, obs=result.obs))
    # The cart ended past the right end of the rail (x > 2.4, pixel column > 540).
    _, column = _centroid(_mask(final[186:195], (0, 0, 0)))
    assert column > 540


@pytest.mark.parametrize("row", [-1, 3])
def test_render_rejects_bad_rows(row: int) -> None:
    """The row must be in [0, num_envs); the message names the range."""
    env = Pendulum(num_envs=3)
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"row must be in \[0, 3\)"):
        env.render(row)


def test_render_rejects_foreign_observations_and_needs_a_reset() -> None:
    """obs must be this env's observation; without obs, render needs a reset first."""
    env = Pendulum(num_envs=2)
    with pytest.raises(EnvContractError, match=r"call reset\(\) before render\(\)"):
        env.render(0)
    obs, _ = Pendulum(num_envs=3).reset(seed=0)
    with pytest.raises(ConfigError, match=r"'obs' is \[2, 3\]"):
        env.render(0, obs=obs)


class _Plain(BaseTorchVecEnv):
    """A minimal env that sets no render view (like most envs users write)."""

    def __init__(self) -> None:
        super().__init__(num_envs=2, layout=DRIFT_LAYOUT)

    def _initial_state(self, uniform: Tensor) -> Tensor:
        return uniform

    def _dynamics(self, state: Tensor, action: Tensor) -> Tensor:
        return state + action

    def _reward(self, state: Tensor, action: Tensor, next_state: Tensor) -> Tensor:
        return next_state[:, 0]

    def _terminated(self, next_state: Tensor) -> Tensor:
        return torch.zeros(self.num_envs, dtype=torch.bool)

    def _observe(self, state: Tensor) -> Tensor:
        return state.clone()


@final
class _ViewWithoutPicture(_Plain):
    """Sets a render view but draws nothing."""

    _render_view: ClassVar[RenderView | None] = _SMALL


def test_envs_without_a_picture_do_not_render() -> None:
    """render and render_fps of an env without a render view raise a clear ConfigError."""
    env = _Plain()
    env.reset(seed=0)
    assert not env.renders
    with pytest.raises(ConfigError, match="_Plain does not render"):
        env.render()
    with pytest.raises(ConfigError, match=r"_Plain\.render_fps: _Plain does not render"):
        _ = env.render_fps
    half_done = _ViewWithoutPicture()
    half_done.reset(seed=0)
    assert half_done.renders
    with pytest.raises(ConfigError, match=r"does not implement _draw\(canvas, obs\)"):
        half_done.render(0)


def test_mujoco_envs_do_not_render() -> None:
    """The differentiable MuJoCo envs draw no frames: render says so."""
    from typedrl.envs.mujoco import CartPoleSwingUpTask, MujocoVecEnv

    env = MujocoVecEnv(task=CartPoleSwingUpTask(), num_envs=1)
    env.reset(seed=0)
    assert not env.renders
    with pytest.raises(ConfigError, match="MujocoVecEnv does not render"):
        env.render(0)
