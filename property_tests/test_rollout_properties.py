"""Property tests: the rollout's alive mask equals a step-by-step reference.

The reference walks the rollout one step at a time, as a complete-rollout
objective would: a row is alive at a step while no earlier step ended its
episode, so the step of its first done is still counted.
"""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.typing import NDArray

from typedrl.apg._collector import first_done_mask

_dones = st.tuples(st.integers(0, 12), st.integers(1, 6)).flatmap(
    lambda shape: arrays(np.bool_, shape)
)


def _reference(done: NDArray[np.bool_]) -> NDArray[np.bool_]:
    alive = np.zeros_like(done)
    for row in range(done.shape[1]):
        ended = False
        for step in range(done.shape[0]):
            alive[step, row] = not ended
            ended = ended or bool(done[step, row])
    return alive


@given(_dones)
def test_first_done_mask_equals_the_loop(done: NDArray[np.bool_]) -> None:
    """The loop-free mask equals the step-by-step one, for any shape, empty included."""
    alive = first_done_mask(torch.from_numpy(done))
    assert alive.dtype == torch.bool
    np.testing.assert_array_equal(alive.numpy(), _reference(done))


@given(_dones)
def test_alive_rows_never_come_back(done: NDArray[np.bool_]) -> None:
    """Rows start alive and, once dead, stay dead; a row without a done is alive throughout."""
    alive = first_done_mask(torch.from_numpy(done)).numpy()
    if alive.shape[0]:
        assert alive[0].all()
    assert np.all(alive[1:] <= alive[:-1])
    never_done = ~done.any(axis=0)
    assert alive[:, never_done].all()
    # Alive steps per row: up to and including the first done.
    if done.shape[0]:
        first = np.where(done.any(axis=0), done.argmax(axis=0) + 1, done.shape[0])
        np.testing.assert_array_equal(alive.sum(axis=0), first)
