"""The counter-based uniform generator."""

import pytest
import torch

from typedrl.envs.builtin import _counter_rng


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_uniforms_are_in_the_open_unit_interval_and_well_spread(dtype: torch.dtype) -> None:
    """Values lie in (0, 1) with mean 1/2, variance 1/12 and uncorrelated draws."""
    device = torch.device("cpu")
    keys = _counter_rng.row_keys(0, 20000, device)
    salts = _counter_rng.draw_salts(4, device)
    draws = _counter_rng.uniform(keys, torch.zeros(20000, dtype=torch.int64), salts, dtype)
    assert draws.shape == (20000, 4)
    assert draws.dtype == dtype
    assert float(draws.min()) > 0.0
    assert float(draws.max()) < 1.0
    assert abs(float(draws.mean()) - 0.5) < 0.01
    assert abs(float(draws.var()) - 1 / 12) < 0.005
    correlation = torch.corrcoef(draws.T.double())
    assert float((correlation - torch.eye(4, dtype=torch.float64)).abs().max()) < 0.03
    histogram = torch.histc(draws[:, 0].double(), bins=10, min=0.0, max=1.0)
    assert float((histogram / 20000 - 0.1).abs().max()) < 0.01


def test_draws_depend_only_on_seed_row_and_episode() -> None:
    """Row keys ignore num_envs; episodes and seeds change the draws."""
    device = torch.device("cpu")
    assert torch.equal(
        _counter_rng.row_keys(7, 3, device), _counter_rng.row_keys(7, 10, device)[:3]
    )
    assert not torch.equal(_counter_rng.row_keys(7, 3, device), _counter_rng.row_keys(8, 3, device))
    keys = _counter_rng.row_keys(7, 3, device)
    salts = _counter_rng.draw_salts(2, device)
    first = _counter_rng.uniform(keys, torch.tensor([0, 1, 2]), salts, torch.float64)
    again = _counter_rng.uniform(keys, torch.tensor([0, 5, 2]), salts, torch.float64)
    assert torch.equal(first[[0, 2]], again[[0, 2]])
    assert not torch.equal(first[1], again[1])
    # Seeds above 2**32 use their high bits too.
    assert not torch.equal(
        _counter_rng.row_keys(1, 2, device), _counter_rng.row_keys(1 + 2**32, 2, device)
    )
