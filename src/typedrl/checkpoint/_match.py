"""Whether a checkpoint may resume a trainer: its config and its policy factory compared."""

from collections.abc import Mapping, Set
from typing import Any

from typedrl._config_fields import plain
from typedrl.errors import CheckpointError
from typedrl.policies._factory import PolicyFactory

from ._paths import StrPath
from ._schema import Checkpoint

__all__ = ["resume_mismatch"]


def resume_mismatch(
    checkpoint: Checkpoint,
    path: StrPath,
    *,
    config: Mapping[str, Any],
    resumable_changes: Set[str],
    policy_factory: PolicyFactory | None,
) -> CheckpointError | None:
    """The reason ``checkpoint`` cannot resume a trainer of this config and policy, or ``None``.

    The config is compared first, then the policy factory.

    Args:
        checkpoint: The checkpoint read from ``path``.
        path: Its file, named in the message.
        config: The resuming trainer's config, as JSON-like values.
        resumable_changes: Config fields that may differ.
        policy_factory: How the resuming trainer rebuilds its policy (``None``: not recorded).

    Example:
        >>> import torch
        >>> from typedrl.checkpoint import Checkpoint, capture_rng_state
        >>> saved = Checkpoint(
        ...     kind="ppo",
        ...     modules={"policy": torch.nn.Linear(1, 1).state_dict()},
        ...     config={"lr": 0.001, "seed": 0},
        ...     rng=(capture_rng_state(),),
        ... )
        >>> error = resume_mismatch(
        ...     saved, "last.ckpt", config={"lr": 0.01, "seed": 0},
        ...     resumable_changes=frozenset(), policy_factory=None,
        ... )
        >>> str(error).split(" (")[1].split(")")[0]
        'lr: saved 0.001, now 0.01'
    """
    return _config_mismatch(checkpoint.config, config, resumable_changes, path) or (
        _policy_mismatch(checkpoint, policy_factory, path)
    )


def _config_mismatch(
    saved: dict[str, Any], current: Mapping[str, Any], resumable: Set[str], path: StrPath
) -> CheckpointError | None:
    missing = object()
    # Fields the checkpoint lacks (added to the config after it was written) are
    # not compared; fields it has that the config no longer has are.
    changed = [
        f"{name}: saved {saved[name]!r}, now {current.get(name, '(absent)')!r}"
        for name in sorted(saved)
        if name not in resumable and plain(saved[name]) != plain(current.get(name, missing))
    ]
    if not changed:
        return None
    return CheckpointError(
        f"{path}: saved with another config ({'; '.join(changed)}). Resume with the "
        "saved config (the checkpoint's config field; on the command line, "
        "`typedrl train --resume RUN_DIR` takes the run's own), or, from Python, pass "
        "strict_config=False to change hyper-parameters on purpose"
    )


def _policy_mismatch(
    checkpoint: Checkpoint, current: PolicyFactory | None, path: StrPath
) -> CheckpointError | None:
    """A checkpoint whose recorded policy factory differs from the trainer's.

    Checked only where both record one (a file of schema 1 or 2, or a policy
    given without a factory, records none to compare).
    """
    saved = checkpoint.policy_factory
    if not isinstance(saved, PolicyFactory) or current is None:
        return None
    if plain(saved.to_dict()) == plain(current.to_dict()):
        return None
    return CheckpointError(
        f"{path}: saved with the policy factory {saved.target} {dict(saved.kwargs)}, now "
        f"{current.target} {dict(current.kwargs)}; resume with the policy it trained "
        "(typedrl train --resume RUN_DIR rebuilds it from the run's config.yaml)"
    )
