"""Tests for typedrl.envs._spaces.ObservationConverter."""

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from typedrl.envs._spaces import ObservationConverter, converted_space, new_tensordict
from typedrl.errors import EnvContractError, NonFiniteError, SpecError

CPU = torch.device("cpu")


def test_batch_copies_the_source_buffer() -> None:
    """Converted tensors do not alias the env's NumPy buffer."""
    converter = ObservationConverter(gym.spaces.Box(-1, 1, (2,)), num_envs=2, device=CPU)
    source = np.zeros((2, 2), dtype=np.float32)
    obs = converter.batch(source)
    source[:] = 5.0
    assert obs["obs"].sum().item() == 0.0


def test_batch_with_rows_replaces_rows() -> None:
    """batch_with_rows swaps the given rows for single observations, leaf by leaf."""
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,)), "b": gym.spaces.Discrete(3)})
    converter = ObservationConverter(space, num_envs=3, device=CPU)
    data: dict[str, np.ndarray] = {"a": np.zeros((3, 2), np.float32), "b": np.zeros(3, np.int64)}
    obs = converter.batch_with_rows(
        data, [0, 2], [{"a": np.ones(2), "b": 2}, {"a": -np.ones(2), "b": 1}]
    )
    assert obs.batch_size == torch.Size([3])
    assert obs["b"].tolist() == [2, 0, 1]
    assert obs["a"][:, 0].tolist() == [1.0, 0.0, -1.0]
    assert obs["a"].dtype == torch.float32
    assert data["b"].tolist() == [0, 0, 0]


def test_dict_space_needs_dict_data() -> None:
    """A non-dict batch for a Dict space is reported."""
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,))})
    converter = ObservationConverter(space, num_envs=1, device=CPU)
    with pytest.raises(EnvContractError, match=r"observation must be a dict with keys \['a'\]"):
        converter.batch(np.zeros((1, 2)))


def test_unsupported_space_names_the_key() -> None:
    """Unsupported leaves are reported with their position in the space."""
    space = gym.spaces.Dict({"text": gym.spaces.Text(3)})
    with pytest.raises(SpecError, match=r"observation space\['text'\]"):
        ObservationConverter(space, num_envs=1, device=CPU)


def test_batch_without_copy_shares_fresh_arrays() -> None:
    """copy=False converts arrays the caller owns in place, casting when needed."""
    converter = ObservationConverter(gym.spaces.Box(-1, 1, (2,)), num_envs=2, device=CPU)
    fresh = np.zeros((2, 2), dtype=np.float32)
    obs = converter.batch(fresh, copy=False)
    assert np.shares_memory(obs["obs"].numpy(), fresh)
    wide = np.zeros((2, 2), dtype=np.float64)
    cast = converter.batch(wide, copy=False)["obs"]
    assert cast.dtype == torch.float32
    assert not np.shares_memory(cast.numpy(), wide)


def test_batch_without_copy_keeps_dict_nesting() -> None:
    """copy=False applies to every leaf of a nested Dict space."""
    space = gym.spaces.Dict({"a": gym.spaces.Dict({"b": gym.spaces.Discrete(3)})})
    converter = ObservationConverter(space, num_envs=2, device=CPU)
    obs = converter.batch({"a": {"b": np.array([1, 2])}}, copy=False)
    assert obs["a", "b"].tolist() == [1, 2]
    assert obs["a"].batch_size == torch.Size([2])


def test_batch_with_rows_aliases_neither_batch_nor_items() -> None:
    """The terminal batch is built from copies of the batch and of the row items."""
    converter = ObservationConverter(gym.spaces.Box(-9, 9, (2,)), num_envs=2, device=CPU)
    data = np.zeros((2, 2), dtype=np.float32)
    item = np.ones(2, dtype=np.float32)
    obs = converter.batch_with_rows(data, [1], [item])
    data[:] = 5.0
    item[:] = 7.0
    assert obs["obs"].tolist() == [[0.0, 0.0], [1.0, 1.0]]


def test_converted_space_keeps_bounds_in_the_new_dtype() -> None:
    """A float64 Box becomes float32 with its bounds cast as observations are."""
    low = np.array([-np.inf, -1e300, -0.1, 0.0])
    high = np.array([np.inf, 1e300, 0.1, 2.5])
    space = gym.spaces.Box(low, high, dtype=np.float64)
    converted = converted_space(space, torch.float32)
    assert isinstance(converted, gym.spaces.Box)
    assert converted.dtype == np.float32
    assert converted.low.tolist() == [-np.inf, -np.inf, np.float32(-0.1), 0.0]
    assert converted.high.tolist() == [np.inf, np.inf, np.float32(0.1), 2.5]
    converter = ObservationConverter(space, num_envs=2, device=CPU)
    assert converter.converted_space == converted
    edges = np.stack([np.array([-5.0, -3e38, -0.1, 0.0]), np.array([5.0, 3e38, 0.1, 2.5])])
    for row in converter.batch(edges)["obs"].numpy():
        assert converted.contains(row)


def test_a_value_beyond_float32_fails_the_finite_check_after_the_cast() -> None:
    """1e300 becomes inf in float32: a NonFiniteError naming the row, the column and the dtype."""
    converter = ObservationConverter(
        gym.spaces.Box(-np.inf, np.inf, (2,), np.float64), num_envs=2, device=CPU
    )
    batch = np.array([[0.0, 1.0], [2.0, 1e300]])
    with (
        pytest.warns(RuntimeWarning, match="overflow"),
        pytest.raises(NonFiniteError, match=r"'obs' of row 1 holds inf\[1\] \(as float32\)"),
    ):
        converter.batch(batch, where="E.step", step=4)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_observations_name_the_key_row_value_and_step(bad: float) -> None:
    """A NaN or an infinity in a floating leaf raises one line with key, row, value and step."""
    space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (3,)), "n": gym.spaces.Discrete(4)})
    converter = ObservationConverter(space, num_envs=3, device=CPU)
    pos = np.zeros((3, 3), np.float32)
    pos[2, 1] = bad
    with pytest.raises(NonFiniteError) as caught:
        converter.batch({"pos": pos, "n": np.zeros(3, np.int64)}, where="E.step", step=9)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"E.step (step 9): observation 'pos' of row 2 holds {bad!r}[1]")
    assert message.endswith("(non-finite rows: [2])")


def test_terminal_observation_rows_are_checked_for_finite_values() -> None:
    """batch_with_rows checks the replaced rows too."""
    converter = ObservationConverter(gym.spaces.Box(-1, 1, (2,)), num_envs=2, device=CPU)
    with pytest.raises(NonFiniteError, match="final_obs 'obs' of row 0 holds nan"):
        converter.batch_with_rows(
            np.zeros((2, 2), np.float32), [0], [np.array([np.nan, 0.0], np.float32)]
        )


def test_converted_space_is_the_space_itself_when_nothing_changes() -> None:
    """Spaces whose observations keep their dtype are returned as they are."""
    for space in (
        gym.spaces.Box(-1, 1, (2,), np.float32),
        gym.spaces.Box(0, 255, (2, 2), np.uint8),
        gym.spaces.Discrete(3),
        gym.spaces.MultiBinary(2),
        gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
    ):
        assert converted_space(space, torch.float32) is space


def test_converted_dict_space_keeps_the_order_of_its_keys() -> None:
    """A Dict space with a converted leaf is rebuilt with the same keys, in the same order."""
    space = gym.spaces.Dict(
        [("z", gym.spaces.Box(-1, 1, (2,), np.float64)), ("a", gym.spaces.Discrete(2))]
    )
    converted = converted_space(space, torch.float32)
    assert isinstance(converted, gym.spaces.Dict)
    assert list(converted.spaces) == ["z", "a"]
    assert converted["z"].dtype == np.float32
    assert converted["a"] is space["a"]


def test_wrong_leaves_name_the_caller_step_and_key() -> None:
    """Shape and dtype mismatches raise EnvContractError with where, step and key."""
    converter = ObservationConverter(gym.spaces.Discrete(3), num_envs=2, device=CPU)
    with pytest.raises(
        EnvContractError,
        match=r"^E\.step \(step 4\): observation 'obs' has shape \[2, 1\], expected \[2\] "
        r"\(\[num_envs, \*space\.shape\]\) from the env's single_observation_space Discrete\(3\)$",
    ):
        converter.batch(np.zeros((2, 1), np.int64), where="E.step", step=4)
    with pytest.raises(EnvContractError, match=r"^E\.reset: observation 'obs' has dtype float32"):
        converter.batch(np.zeros(2, np.float32), where="E.reset")
    with pytest.raises(EnvContractError, match=r"final_obs 'obs' of row 1 has shape \[2\]"):
        converter.batch_with_rows(np.zeros(2, np.int64), [1], [np.zeros(2, np.int64)])


def test_new_tensordict_holds_the_leaves_themselves() -> None:
    """The TensorDict is an ordinary one (unlocked, unnamed) around the very leaves given."""
    leaf = torch.arange(6.0).reshape(3, 2)
    size = torch.Size((3,))
    group = new_tensordict({"x": torch.zeros(3, 1)}, size, CPU)
    built = new_tensordict({"obs": leaf, "group": group}, size, CPU)
    assert type(built) is TensorDict
    assert built.batch_size == size
    assert built.device == CPU
    assert built["obs"] is leaf
    assert built["group"] is group
    assert not built.is_locked
    assert built.names == [None]
    assert (built + 1)["obs"].tolist() == (leaf + 1).tolist()
    assert built.expand(2, 3).batch_size == torch.Size((2, 3))
    built["extra"] = torch.zeros(3)
    assert set(built.keys()) == {"obs", "group", "extra"}


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        (
            gym.spaces.Dict(
                {
                    "direction": gym.spaces.Discrete(4),
                    "image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8),
                    "mission": gym.spaces.Text(5),
                }
            ),
            r"^observation space\['mission'\]: unsupported observation space Text\(.*\); "
            r"expected .*: keep the other keys with --wrapper "
            r"'FilterObservation\(filter_keys=\[\"direction\", \"image\"\]\)' \(MiniGrid: or keep "
            r"the image alone with --wrapper minigrid.wrappers:ImgObsWrapper\)$",
        ),
        (
            gym.spaces.Tuple((gym.spaces.Discrete(32), gym.spaces.Discrete(11))),
            r"^observation space: unsupported observation space Tuple\(Discrete\(32\), "
            r"Discrete\(11\)\); .*: flatten the whole observation into one Box with --wrapper "
            r"FlattenObservation$",
        ),
        (
            gym.spaces.Dict(
                {
                    "a": gym.spaces.Tuple((gym.spaces.Discrete(2),)),
                    "b": gym.spaces.Tuple((gym.spaces.Discrete(3),)),
                    "c": gym.spaces.Box(-1, 1, (2,)),
                }
            ),
            r"^observation keys \['a', 'b'\]: .*--wrapper 'FilterObservation\(filter_keys="
            r"\[\"c\"\]\)' or flatten the whole observation into one Box with --wrapper "
            r"FlattenObservation$",
        ),
        (
            gym.spaces.Text(4),
            r"^observation space: unsupported .*: encode it as arrays with a "
            r"gymnasium.ObservationWrapper of your own \(--wrapper module:Class\)$",
        ),
    ],
)
def test_unsupported_spaces_name_the_wrapper_that_fixes_them(
    space: gym.Space[Any], expected: str
) -> None:
    """One line naming the key(s) and the --wrapper that keeps or flattens the rest."""
    with pytest.raises(SpecError, match=expected) as caught:
        ObservationConverter(space, num_envs=1, device=CPU)
    assert "\n" not in str(caught.value)
    with pytest.raises(SpecError, match=expected):
        converted_space(space, torch.float32)
