"""Checkpoints: one file format for every typedrl trainer.

A checkpoint is *data, never code*. It is written with :func:`torch.save` as a
plain dict of tensors, numbers, strings and containers, and read back with
``torch.load(weights_only=True)`` only, so opening a file cannot run code.

- :class:`Checkpoint` is the in-memory, validated form shared by every
  trainer: the trainer kind, the env id it trained on and how to rebuild its
  policy (a :class:`~typedrl.policies.PolicyFactory`), state
  dicts of modules, optimizers and schedulers, counters, the best score, the
  JSON-like config, per-rank RNG states (:class:`RngState`) and
  :class:`CheckpointMetadata`.
- :func:`save_checkpoint` writes atomically: a crash leaves either the old file
  or the new one, never half of one. :func:`load_checkpoint` raises
  :class:`~typedrl.errors.CheckpointError` naming the file for anything that is
  not a complete checkpoint of a readable schema version, and upgrades files of
  earlier versions to :data:`SCHEMA_VERSION`. :func:`load_into` restores one
  component from it.
- :func:`capture_rng_state` and :func:`restore_rng_state` save and set back the
  global torch, numpy and Python generators.
- :class:`CheckpointPaths` names the files of a run directory.

Only one process should write a file. In a distributed run the caller saves on
global rank 0 after gathering every rank's :func:`capture_rng_state` into
:attr:`Checkpoint.rng` (index = global rank); the functions above perform no
collectives. A trainer's whole state goes through
:meth:`AbstractTrainer.save <typedrl.training.AbstractTrainer.save>` and
:meth:`~typedrl.training.AbstractTrainer.load`, which gather, write, read and
restore it on every rank with the private modules of this package: what a
trainer checkpoints (:class:`~typedrl.training.TrainerState`), whether a
checkpoint fits the resuming trainer, and the RNG streams restored or re-derived.

Example:
    >>> import tempfile
    >>> import torch
    >>> policy = torch.nn.Linear(3, 2)
    >>> checkpoint = Checkpoint(
    ...     kind="ppo",
    ...     env_id="CartPole-v1",
    ...     modules={"policy": policy.state_dict()},
    ...     counters={"epoch": 12, "timesteps": 98_304},
    ...     config={"lr": 3e-4, "hidden_sizes": [64, 64]},
    ...     rng=(capture_rng_state(),),
    ... )
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     paths = CheckpointPaths(directory)
    ...     written = save_checkpoint(paths.last, checkpoint)
    ...     restored = load_checkpoint(written, expected_kind="ppo")
    >>> restored.kind, restored.env_id, restored.counters
    ('ppo', 'CartPole-v1', {'epoch': 12, 'timesteps': 98304})
    >>> load_into(policy, restored.modules["policy"], name="policy", path=written)
"""

from ._io import load_checkpoint as load_checkpoint
from ._io import load_into as load_into
from ._io import save_checkpoint as save_checkpoint
from ._paths import CHECKPOINT_SUFFIX as CHECKPOINT_SUFFIX
from ._paths import CheckpointPaths as CheckpointPaths
from ._paths import StrPath as StrPath
from ._rng import capture_rng_state as capture_rng_state
from ._rng import reseed_rng as reseed_rng
from ._rng import restore_rng_state as restore_rng_state
from ._schema import DEFAULT_POLICY as DEFAULT_POLICY
from ._schema import FORMAT_MARKER as FORMAT_MARKER
from ._schema import POLICY_KEY as POLICY_KEY
from ._schema import SCHEMA_VERSION as SCHEMA_VERSION
from ._schema import Checkpoint as Checkpoint
from ._schema import CheckpointKind as CheckpointKind
from ._schema import CheckpointMetadata as CheckpointMetadata
from ._schema import RngState as RngState
from ._schema import check_kind as check_kind

__all__ = [
    "CHECKPOINT_SUFFIX",
    "DEFAULT_POLICY",
    "FORMAT_MARKER",
    "POLICY_KEY",
    "SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointKind",
    "CheckpointMetadata",
    "CheckpointPaths",
    "RngState",
    "StrPath",
    "capture_rng_state",
    "check_kind",
    "load_checkpoint",
    "load_into",
    "reseed_rng",
    "restore_rng_state",
    "save_checkpoint",
]
