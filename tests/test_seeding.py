"""Tests for typedrl.seeding.derive_seed."""

import itertools

import numpy as np
import pytest
import torch

from typedrl.seeding import ENV_SEED_LIMIT, SEED_LIMIT, SEED_STREAMS, derive_seed, env_seed


def test_known_values_are_stable_across_processes_and_releases() -> None:
    """Pinned outputs: a hash of the inputs' text, independent of PYTHONHASHSEED and the process."""
    assert derive_seed(0, "env") == 3834899488094598683
    assert derive_seed(7, "sampler", rank=3, index=12) == 3027994446614743777
    assert derive_seed(2**70, "env_restart", rank=15, index=1000) == 1520299232636796389


def test_deterministic_and_defaults_are_rank_zero_index_zero() -> None:
    """The same inputs give the same seed; rank and index default to 0."""
    assert derive_seed(5, "init", rank=2, index=9) == derive_seed(5, "init", rank=2, index=9)
    assert derive_seed(5, "init") == derive_seed(5, "init", rank=0, index=0)


def test_every_input_changes_the_seed() -> None:
    """Changing any one of seed, stream, rank or index changes the result."""
    base = derive_seed(1, "env", rank=1, index=1)
    assert derive_seed(2, "env", rank=1, index=1) != base
    assert derive_seed(1, "eval_env", rank=1, index=1) != base
    assert derive_seed(1, "env", rank=2, index=1) != base
    assert derive_seed(1, "env", rank=1, index=2) != base
    # Fields are separated: (seed 1, rank 12) and (seed 11, rank 2) read differently.
    assert derive_seed(1, "env", rank=12) != derive_seed(11, "env", rank=2)
    assert derive_seed(1, "env", rank=1, index=23) != derive_seed(1, "env", rank=12, index=3)


def test_every_stream_is_accepted_and_distinct() -> None:
    """All five streams are valid and give five different seeds for the same run seed."""
    assert set(SEED_STREAMS) == {"env", "eval_env", "init", "sampler", "env_restart"}
    seeds = {derive_seed(3, stream) for stream in SEED_STREAMS}
    assert len(seeds) == len(SEED_STREAMS)


def test_results_lie_in_the_range_every_seeding_api_accepts() -> None:
    """Seeds are ints in [0, 2**63), accepted by torch, numpy and Python's random."""
    for seed, stream, rank in itertools.product(
        [0, 1, 2**31, 2**63, 2**64 + 5], SEED_STREAMS, range(4)
    ):
        value = derive_seed(seed, stream, rank=rank, index=rank * 1000)
        assert type(value) is int
        assert 0 <= value < 2**63
    value = derive_seed(0, "init")
    torch.Generator().manual_seed(value)
    np.random.default_rng(value)


def test_seeds_spread_over_the_high_bits() -> None:
    """Consecutive inputs do not give neighbouring seeds (no arithmetic formula)."""
    seeds = [derive_seed(0, "env", rank=rank) for rank in range(64)]
    assert max(seeds) >= 2**62
    assert min(abs(a - b) for a, b in itertools.combinations(seeds, 2)) > 2**32


def test_rank_and_index_are_keyword_only() -> None:
    """rank and index cannot be passed by position (a swapped pair would go unnoticed)."""
    with pytest.raises(TypeError):
        derive_seed(0, "env", 1)  # type: ignore[call-arg]


@pytest.mark.parametrize("rows", [1, 2, 8, 4096])
def test_env_seeds_keep_every_row_within_32_bits(rows: int) -> None:
    """env_seed(s, rows) + rows - 1 < 2**32 for derived seeds; smaller seeds pass unchanged."""
    for stream, rank in itertools.product(SEED_STREAMS, range(3)):
        folded = env_seed(derive_seed(11, stream, rank=rank), rows=rows)
        assert folded >= 0
        assert folded + rows - 1 < ENV_SEED_LIMIT
        np.random.RandomState(folded + rows - 1)  # the legacy generator accepts the last row's
    assert env_seed(ENV_SEED_LIMIT - rows, rows=rows) == ENV_SEED_LIMIT - rows
    assert env_seed(12345, rows=rows) == 12345
    assert env_seed(SEED_LIMIT - 1, rows=rows) == (SEED_LIMIT - 1) % (ENV_SEED_LIMIT - rows + 1)
