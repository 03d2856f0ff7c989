"""One derivation of every random stream's seed from the run seed.

A run has one seed. Every random stream of every rank (its training env, its
evaluation env, the model's initialisation, the minibatch sampler, the env
restart after a resume without env state) gets its own seed from
:func:`derive_seed`, a hash of ``(run seed, stream, rank, index)``: distinct
inputs give distinct, unrelated seeds (no arithmetic formula whose values
collide across ranks or epochs), and the same inputs always give the same seed,
in every process and on every machine.

Example:
    >>> derive_seed(0, "env", rank=1) == derive_seed(0, "env", rank=1)
    True
    >>> derive_seed(0, "env", rank=1) != derive_seed(0, "env", rank=0)
    True
    >>> 0 <= derive_seed(7, "sampler") < 2**63
    True

Some envs take narrower seeds: NumPy's legacy ``RandomState`` (which
dm_control, Isaac Lab and many older envs seed) refuses anything outside
``[0, 2**32)``, and a Gymnasium vector env seeds its row ``i`` with
``seed + i``. :func:`env_seed` folds a derived seed into that range;
typedrl's Gymnasium and Isaac Lab adapters apply it to every seed they hand
on, and typedrl's own torch envs take the derived seed as it is.

    >>> env_seed(derive_seed(0, "env"), rows=8) < 2**32 - 7
    True
"""

import hashlib
from typing import Final, Literal, TypeAlias, get_args

__all__ = ["ENV_SEED_LIMIT", "SEED_LIMIT", "SEED_STREAMS", "SeedStream", "derive_seed", "env_seed"]

SeedStream: TypeAlias = Literal["env", "eval_env", "init", "sampler", "env_restart"]
"""The random streams of a run:

- ``"env"``: the training env's seeded reset (and construction, from the command line);
- ``"eval_env"``: the evaluation env's reset at every evaluation (and its construction);
- ``"init"``: the global torch generator, seeded before the model is built
  (initialisation, then action sampling);
- ``"sampler"``: the generator that shuffles minibatches;
- ``"env_restart"``: the training env's reset when a run resumes from a checkpoint
  that holds no env state (``index`` is the iteration it resumes at).
"""

SEED_STREAMS: Final[tuple[SeedStream, ...]] = get_args(SeedStream)
"""Every valid :data:`SeedStream`."""

SEED_LIMIT: Final = 2**63
"""Every seed :func:`derive_seed` returns is below this bound."""

ENV_SEED_LIMIT: Final = 2**32
"""Every seed :func:`env_seed` returns (plus its row offsets) is below this bound: the
range of NumPy's legacy ``RandomState`` seeds."""


def derive_seed(seed: int, stream: SeedStream, *, rank: int = 0, index: int = 0) -> int:
    """The seed of one random stream of one rank, from the run's seed.

    The result is the first 63 bits of a BLAKE2b hash of the four inputs, so it
    is a non-negative int below ``2**63`` that torch, numpy's ``default_rng``,
    Gymnasium and the built-in envs all accept. Two different inputs collide
    only with the probability of a 63-bit hash collision.

    Args:
        seed: The run's seed (a non-negative int).
        stream: Which stream (:data:`SeedStream`).
        rank: The global rank of the process.
        index: A further counter within the stream (the iteration, say).
    """
    # One field per input, separated, so that no two different inputs share a text.
    text = f"typedrl-seed/{seed}/{stream}/{rank}/{index}".encode()
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return int.from_bytes(digest, "big") % SEED_LIMIT


def env_seed(seed: int, *, rows: int = 1) -> int:
    """``seed`` folded so that ``rows`` consecutive seeds from it lie in ``[0, 2**32)``.

    A vector env of ``rows`` rows seeds row ``i`` with ``seed + i`` (Gymnasium's
    ``SyncVectorEnv`` and ``AsyncVectorEnv`` do), and an env that seeds NumPy's
    legacy ``RandomState`` refuses anything from ``2**32`` on. The result is
    ``seed`` modulo ``2**32 - rows + 1``: a seed already small enough is
    returned as it is, and a 63-bit seed from :func:`derive_seed` keeps 32
    bits of its hash.

    Args:
        seed: A non-negative seed (from :func:`derive_seed`, or a user's).
        rows: How many consecutive seeds the env derives from it (``num_envs``).

    Example:
        >>> env_seed(7, rows=4), env_seed(2**32 - 1, rows=1), env_seed(2**32 - 3, rows=4)
        (7, 4294967295, 0)
    """
    return seed % (ENV_SEED_LIMIT - rows + 1)
