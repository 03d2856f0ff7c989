"""Property tests: per-epoch episode statistics equal step-by-step bookkeeping.

The reference walks the epoch one step at a time, as a collector would:
``return += reward`` and ``length += 1`` on valid steps, a record where an
episode ends on a valid step, and a reset of both wherever an episode ends.
Epochs are chained, so what the unfinished episodes carry over is checked too.
"""

from dataclasses import dataclass
from typing import TypeVar

import torch
from hypothesis import given
from hypothesis import strategies as st

from typedrl.episodes import epoch_episodes

T = TypeVar("T")


@dataclass(frozen=True)
class _Epochs:
    rewards: list[list[list[float]]]
    done: list[list[list[bool]]]
    valid: list[list[list[bool]]]


@st.composite
def _epochs(draw: st.DrawFn) -> _Epochs:
    num_epochs = draw(st.integers(1, 3))
    num_steps = draw(st.integers(1, 9))
    num_envs = draw(st.integers(1, 4))

    def grid(elements: st.SearchStrategy[T]) -> list[list[list[T]]]:
        row = st.lists(elements, min_size=num_envs, max_size=num_envs)
        epoch = st.lists(row, min_size=num_steps, max_size=num_steps)
        return draw(st.lists(epoch, min_size=num_epochs, max_size=num_epochs))

    return _Epochs(
        rewards=grid(st.floats(-100.0, 100.0, allow_nan=False, width=32)),
        done=grid(st.booleans()),
        valid=grid(st.booleans()),
    )


@given(_epochs())
def test_epoch_episodes_equal_step_by_step_bookkeeping(epochs: _Epochs) -> None:
    num_envs = len(epochs.rewards[0][0])
    # The reference: plain Python, one step at a time.
    running_return = [0.0] * num_envs
    running_length = [0] * num_envs
    carried_return = torch.zeros(num_envs, dtype=torch.float64)
    carried_length = torch.zeros(num_envs, dtype=torch.int64)
    for rewards, done, valid in zip(epochs.rewards, epochs.done, epochs.valid, strict=True):
        expected: list[tuple[int, int, float, int]] = []
        for t, (step_rewards, step_done, step_valid) in enumerate(
            zip(rewards, done, valid, strict=True)
        ):
            for i in range(num_envs):
                if step_valid[i]:
                    running_return[i] += float(torch.tensor(step_rewards[i]).double())
                    running_length[i] += 1
                if step_done[i]:
                    if step_valid[i]:
                        expected.append((t, i, running_return[i], running_length[i]))
                    running_return[i], running_length[i] = 0.0, 0
        result = epoch_episodes(
            torch.tensor(rewards, dtype=torch.float32),
            torch.tensor(done),
            torch.tensor(valid),
            carried_return,
            carried_length,
        )
        recorded = [(int(t), int(i)) for t, i in result.ended.nonzero().tolist()]
        assert recorded == [(t, i) for t, i, _, _ in expected]
        for t, i, episode_return, episode_length in expected:
            assert (
                abs(float(result.returns[t, i]) - episode_return)
                <= 1e-9 * max(1.0, abs(episode_return)) + 1e-9
            )
            assert int(result.lengths[t, i]) == episode_length
        torch.testing.assert_close(
            result.return_so_far,
            torch.tensor(running_return, dtype=torch.float64),
            rtol=1e-12,
            atol=1e-9,
        )
        assert result.length_so_far.tolist() == running_length
        carried_return, carried_length = result.return_so_far, result.length_so_far
