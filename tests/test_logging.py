"""MetricAggregator: weighted means of scalars recorded on the device."""

import pytest
import torch

from typedrl.distributed import SingleProcess
from typedrl.logging import MetricAggregator

CPU = torch.device("cpu")


def test_add_is_a_weighted_mean_and_reduce_resets() -> None:
    metrics = MetricAggregator(["loss", "return"], device=CPU)
    metrics.add("loss", torch.tensor(2.0))
    metrics.add("loss", 4.0, weight=torch.tensor(3.0))
    assert metrics.reduce(SingleProcess()) == {"loss": pytest.approx(3.5)}
    # Reduced sums start again from zero; unrecorded metrics are left out.
    metrics.add("return", 1.0)
    assert metrics.reduce(SingleProcess()) == {"return": 1.0}
    assert metrics.reduce(SingleProcess()) == {}


def test_add_rows_records_every_row_with_weight_one() -> None:
    metrics = MetricAggregator(["a", "b", "c"], device=CPU)
    rows = torch.tensor([[1.0, 10.0], [3.0, 30.0], [5.0, 20.0]])
    metrics.add_rows(("c", "a"), rows)
    metrics.add("a", 40.0)
    # c: mean of column 0; a: column 1 and the extra record, four records in all.
    assert metrics.reduce(SingleProcess()) == {
        "a": pytest.approx((10.0 + 30.0 + 20.0 + 40.0) / 4),
        "c": pytest.approx(3.0),
    }
    # No rows: nothing recorded.
    metrics.add_rows(("a", "b"), rows[:0])
    assert metrics.reduce(SingleProcess()) == {}


def test_add_many_records_the_masked_entries() -> None:
    metrics = MetricAggregator(["length"], device=CPU)
    values = torch.tensor([2, 4, 8, 16])
    metrics.add_many("length", values, torch.tensor([True, False, True, False]))
    assert metrics.reduce(SingleProcess()) == {"length": pytest.approx(5.0)}
