"""Counter-based uniform draws keyed by ``(seed, row, episode, draw)``.

A built-in env must give row ``i`` the same initial states whatever
``num_envs`` is and whatever the other rows do, without a Python loop over rows
and without reading tensor values on the host. A stateful generator cannot do
that; a hash of the draw's coordinates can: every uniform is a pure function of
``(seed, row, episode, draw)``.

The hash is a 32-bit integer mixer (xor-shift / multiply rounds) evaluated with
``int64`` tensor ops on any device: a full mixer keys each ``(seed, row)`` and
each ``(row key, episode)``, and a lighter salted round derives the draws.
Every intermediate stays in ``[0, 2**32)`` and every multiplier is below
``2**31``, so products stay below ``2**63``: no signed overflow, and arithmetic
right shifts equal logical ones. Episodes are keyed by a 32-bit hash; uniforms
carry 24 (float32) or 32 (float64) random bits.

:func:`uniform_block` computes the same values for many episodes at once with
``int32`` ops (wrapping multiplies and masked shifts: the same arithmetic modulo
``2**32``, at half the memory traffic and with native vector multiplies) in
reusable work buffers, which is what the envs' per-row pools of initial states
use.
"""

import functools
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

__all__ = ["BlockWork", "draw_salts", "row_keys", "to_int32", "uniform", "uniform_block"]

_MASK32 = 0xFFFFFFFF
# Odd multipliers below 2**31 (products of 32-bit values stay below 2**63).
_MUL_A = 0x7FEB352D
_MUL_B = 0x2C1B3C6D
# Domain separators, so that (seed, row), episode and draw hashes never coincide.
_SEED_SALT = 0x243F6A88
_DRAW_SALT = 0x03707344
# Odd, below 2**31: spreads consecutive episode numbers over the 32-bit range.
_GOLDEN = 0x1E3779B9


def _mix32(x: Int[Tensor, "*shape"]) -> Int[Tensor, "*shape"]:
    """A bijective 32-bit mixer on ``int64`` values in ``[0, 2**32)``."""
    # Out-of-place ops: on CPU, in-place int64 multiplies by a scalar are slower.
    x = x ^ (x >> 16)
    x = (x * _MUL_A) & _MASK32
    x = x ^ (x >> 15)
    x = (x * _MUL_B) & _MASK32
    return x ^ (x >> 16)


def row_keys(seed: int, num_envs: int, device: torch.device) -> Int[Tensor, " num_envs"]:
    """Per-row keys: a hash of ``(seed, row)``, in ``[0, 2**32)``.

    Args:
        seed: A non-negative seed; only its low 64 bits matter.
        num_envs: Number of rows.
        device: Device of the keys.
    """
    low = torch.tensor((seed & _MASK32) ^ _SEED_SALT, dtype=torch.int64, device=device)
    high = torch.tensor((seed >> 32) & _MASK32, dtype=torch.int64, device=device)
    seed_key = _mix32(_mix32(low) ^ high)
    rows = torch.arange(num_envs, dtype=torch.int64, device=device)
    return _mix32(seed_key ^ rows)


def draw_salts(num_draws: int, device: torch.device) -> Int[Tensor, "num_draws 1"]:
    """Per-draw salts for :func:`uniform` (computed once per env, not per step)."""
    draws = torch.arange(num_draws, dtype=torch.int64, device=device).unsqueeze(-1)
    return _mix32(draws ^ _DRAW_SALT)


def uniform(
    keys: Int[Tensor, " num_envs"],
    episodes: Int[Tensor, " num_envs"],
    salts: Int[Tensor, "num_draws 1"],
    dtype: torch.dtype,
) -> Float[Tensor, "num_envs num_draws"]:
    """Uniforms in ``(0, 1)`` (float64) or ``(0, 1]`` (float32) for each row's given episode.

    Args:
        keys: Row keys from :func:`row_keys`.
        episodes: One non-negative episode number per row.
        salts: Per-draw salts from :func:`draw_salts`, one per uniform.
        dtype: ``torch.float32`` or ``torch.float64``.

    Returns:
        ``u[i, d]``, a pure function of ``(keys[i], episodes[i], d)``, stored
        column by column (each draw's column is contiguous).
    """
    # A full mix per (row, episode): the 32-bit episode hash.
    episode_hash = _mix32(keys ^ (((episodes & _MASK32) * _GOLDEN) & _MASK32))
    # A lighter, still non-linear round per draw (salt, multiply, xor-shift),
    # computed as [num_draws, num_envs] so that each draw's column is contiguous.
    bits = ((episode_hash ^ salts) * _MUL_A) & _MASK32
    bits = bits ^ (bits >> 15)
    if dtype == torch.float64:
        return ((bits.to(torch.float64) + 0.5) * 2.0**-32).T
    # The top 24 bits plus one half: every value but the largest is exact in float32; the
    # largest, (2**24 - 0.5) * 2**-24, rounds to 1.0, so float32 draws lie in (0, 1].
    return (((bits >> 8).to(dtype) + 0.5) * 2.0**-24).T


def to_int32(x: Int[Tensor, "*shape"]) -> Int[Tensor, "*shape"]:
    """The low 32 bits of non-negative ``int64`` values, as ``int32`` (same bits)."""
    low = x & _MASK32
    return torch.where(low >= 2**31, low - 2**32, low).to(torch.int32)


@dataclass(frozen=True)
class BlockWork:
    """Reusable ``int32`` work buffers of :func:`uniform_block`.

    Attributes:
        hashes: ``[num_episodes, num_envs]`` episode hashes.
        hash_scratch: A scratch buffer shaped like ``hashes``.
        bits: ``[num_draws, num_episodes, num_envs]`` draw bits.
        bits_scratch: A scratch buffer shaped like ``bits``.
        offsets: ``[num_episodes, 1]``: ``0, 1, ..., num_episodes - 1``.
    """

    hashes: Int[Tensor, "num_episodes num_envs"]
    hash_scratch: Int[Tensor, "num_episodes num_envs"]
    bits: Int[Tensor, "num_draws num_episodes num_envs"]
    bits_scratch: Int[Tensor, "num_draws num_episodes num_envs"]
    offsets: Int[Tensor, "num_episodes 1"]

    @staticmethod
    def allocate(
        num_draws: int, num_episodes: int, num_envs: int, device: torch.device
    ) -> "BlockWork":
        """Uninitialised buffers for ``num_episodes`` episodes of ``num_envs`` rows."""

        def empty(*shape: int) -> Tensor:
            return torch.empty(shape, dtype=torch.int32, device=device)

        return BlockWork(
            empty(num_episodes, num_envs),
            empty(num_episodes, num_envs),
            empty(num_draws, num_episodes, num_envs),
            empty(num_draws, num_episodes, num_envs),
            torch.arange(num_episodes, dtype=torch.int32, device=device).unsqueeze(-1),
        )


def _shift_xor_(x: Tensor, shift: int, scratch: Tensor) -> None:
    """``x ^= x >>> shift`` in place on ``int32`` bit patterns (a logical shift)."""
    torch.bitwise_right_shift(x, shift, out=scratch)
    scratch.bitwise_and_((1 << (32 - shift)) - 1)
    x.bitwise_xor_(scratch)


def uniform_block(
    keys: Int[Tensor, " num_envs"],
    first_episodes: Int[Tensor, " num_envs"],
    salts: Int[Tensor, " num_draws"],
    dtype: torch.dtype,
    work: BlockWork,
) -> Float[Tensor, "num_samples num_draws"]:
    """:func:`uniform` for the next ``num_episodes`` episodes of every row, in one go.

    Args:
        keys: Row keys from :func:`row_keys`, converted with :func:`to_int32`.
        first_episodes: Per row, the first episode wanted, converted with
            :func:`to_int32` (only its low 32 bits matter).
        salts: Per-draw salts from :func:`draw_salts`, flattened and converted
            with :func:`to_int32`.
        dtype: ``torch.float32`` or ``torch.float64``.
        work: Buffers from :meth:`BlockWork.allocate`; ``num_episodes`` is
            their second-to-last dimension. Overwritten.

    Returns:
        ``[num_episodes * num_envs, num_draws]``: row ``k * num_envs + i`` is,
        bit for bit, row ``i`` of :func:`uniform` for episodes
        ``first_episodes + k`` (with the ``int64`` keys and salts), stored
        column by column.
    """
    hashes, scratch = work.hashes, work.hash_scratch
    # (episode * golden) ^ key, then the full mixer; int32 products wrap modulo 2**32.
    torch.add(first_episodes, work.offsets, out=hashes)
    hashes.mul_(_GOLDEN).bitwise_xor_(keys)
    _shift_xor_(hashes, 16, scratch)
    hashes.mul_(_MUL_A)
    _shift_xor_(hashes, 15, scratch)
    hashes.mul_(_MUL_B)
    _shift_xor_(hashes, 16, scratch)
    bits, bits_scratch = work.bits, work.bits_scratch
    torch.bitwise_xor(hashes.unsqueeze(0), salts.view(-1, 1, 1), out=bits)
    bits.mul_(_MUL_A)
    _shift_xor_(bits, 15, bits_scratch)
    num_draws = bits.shape[0]
    if dtype == torch.float64:
        unsigned = bits.to(torch.int64) & _MASK32
        draws = (unsigned.to(torch.float64) + 0.5) * 2.0**-32
    else:
        top = torch.bitwise_right_shift(bits, 8, out=bits_scratch).bitwise_and_(0xFFFFFF)
        # (top + 0.5) * 2**-24 with a single rounding, as in uniform(): the scaling is exact.
        draws = torch.add(_half_ulp(dtype, bits.device), top, alpha=2.0**-24)
    return draws.view(num_draws, -1).T


@functools.cache
def _half_ulp(dtype: torch.dtype, device: torch.device) -> Float[Tensor, ""]:
    """``2**-25`` as a 0-d tensor (made once per dtype and device: no copy per call)."""
    return torch.tensor(2.0**-25, dtype=dtype, device=device)
