"""The child process of :func:`~typedrl.agents._compiled_update.start_background_precompile`.

``python -P -m typedrl.agents._precompile_worker SPEC LOCK KEY``: reads the spec
file the run wrote (:func:`write_spec`; and deletes it), rebuilds the run's
policy and Adam, compiles the minibatch update for the spec's minibatch as
:class:`CompiledUpdate` does (which saves the precompiled update and records
it), times it against the eager update on that minibatch and records both
(:func:`measure_update`, :meth:`CompileRecord.add_timing`: the next run's
break-even), and removes LOCK if it still names this process. A failure writes
``KEY.failed`` with the traceback beside the precompiled files, so that later
runs do not try again.

The spec is read with ``torch.load(weights_only=True)``, as every file
typedrl reads: it holds tensors and plain values only, the spaces included
(:func:`encode_space`).
"""

import contextlib
import dataclasses
import os
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

if TYPE_CHECKING:
    from torch import nn
    from torch.optim import Optimizer

    from typedrl.agents._config import PPOConfig
    from typedrl.agents._loss import EpochData

__all__ = ["decode_space", "encode_space", "main", "write_spec"]

_BOX_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


def encode_space(space: gym.Space[Any]) -> dict[str, Any] | None:
    """``space`` as plain values and tensors, or ``None`` for a kind a policy cannot take.

    Box, Discrete, MultiDiscrete, MultiBinary and Dicts of them;
    :func:`decode_space` builds an equal space back.
    """
    import torch  # noqa: PLC0415 - the worker imports it after lowering its priority

    encoded: dict[str, Any] | None = None
    if isinstance(space, gym.spaces.Box) and str(space.dtype) in _BOX_DTYPES:
        low, high = (torch.from_numpy(np.array(bound)) for bound in (space.low, space.high))
        encoded = {"kind": "Box", "low": low, "high": high, "dtype": str(space.dtype)}
    elif isinstance(space, gym.spaces.Discrete):
        encoded = {"kind": "Discrete", "n": int(space.n), "start": int(space.start)}
    elif isinstance(space, gym.spaces.MultiDiscrete):
        nvec, start = (torch.from_numpy(np.array(part)) for part in (space.nvec, space.start))
        encoded = {"kind": "MultiDiscrete", "nvec": nvec, "start": start}
    elif isinstance(space, gym.spaces.MultiBinary):
        n = space.n  # an int, or a shape (kept as given: it shows in the space's repr)
        shape = int(n) if isinstance(n, int | np.integer) else [int(size) for size in np.asarray(n)]
        encoded = {"kind": "MultiBinary", "n": shape}
    elif isinstance(space, gym.spaces.Dict):
        parts = {str(key): encode_space(sub) for key, sub in space.spaces.items()}
        if all(part is not None for part in parts.values()):
            encoded = {"kind": "Dict", "spaces": parts}
    return encoded


def decode_space(encoded: Mapping[str, Any]) -> gym.Space[Any]:
    """The space :func:`encode_space` described."""
    kind = encoded["kind"]
    if kind == "Box":
        dtype = np.dtype(encoded["dtype"])
        return gym.spaces.Box(encoded["low"].numpy(), encoded["high"].numpy(), dtype=dtype)
    if kind == "Discrete":
        return gym.spaces.Discrete(encoded["n"], start=encoded["start"])
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(encoded["nvec"].numpy(), start=encoded["start"].numpy())
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(encoded["n"])
    if kind == "Dict":
        return gym.spaces.Dict({key: decode_space(sub) for key, sub in encoded["spaces"].items()})
    raise ValueError(f"not an encoded space: {kind!r}")


def write_spec(
    path: Path,
    *,
    config: "PPOConfig",
    spaces: tuple[gym.Space[Any], gym.Space[Any]],
    policy: "nn.Module",
    optimizer: "Optimizer",
    batch: "EpochData",
    record_folder: Path,
) -> bool:
    """Save what the worker needs; ``False`` (nothing written) when a space cannot be encoded.

    The policy's weights, Adam's betas and eps (its first group), the
    minibatch's tensors (the observations as a plain dict) and the folder of
    the compile record.
    """
    import torch  # noqa: PLC0415 - see encode_space

    observation, action = (encode_space(space) for space in spaces)
    if observation is None or action is None:
        return False
    group = optimizer.param_groups[0]
    tensors = {field.name: getattr(batch, field.name) for field in dataclasses.fields(batch)}
    tensors["obs"] = batch.obs.to_dict()
    spec = {
        "config": config.to_dict(),
        "spaces": [observation, action],
        "dtype": next(iter(policy.parameters())).dtype,
        "threads": torch.get_num_threads(),
        "policy": {name: t.detach().cpu().clone() for name, t in policy.state_dict().items()},
        "adam": {"betas": [float(beta) for beta in group["betas"]], "eps": float(group["eps"])},
        "batch": {"rows": int(batch.advantage.shape[0]), "tensors": tensors},
        "record": str(record_folder),
    }
    torch.save(spec, path)
    return True


def main(argv: list[str]) -> int:
    """Precompile the update a spec file describes; 0 when it was compiled."""
    spec_path, lock, key = Path(argv[0]), Path(argv[1]), argv[2]
    with contextlib.suppress(AttributeError, OSError):
        os.nice(10)  # below the runs this machine is doing
    failed = None
    try:
        import torch  # noqa: PLC0415 - after the priority is lowered

        spec: dict[str, Any] = torch.load(spec_path, weights_only=True)
        spec_path.unlink(missing_ok=True)
        # The run's thread count: it is written into the compiled kernels.
        torch.set_num_threads(int(spec["threads"]))
        _compile(spec)
    except Exception:  # everything goes to the .failed file: the run's console is not ours
        failed = traceback.format_exc()
    finally:
        spec_path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            if lock.read_text().strip() == str(os.getpid()):
                lock.unlink()
    if failed is not None:
        with contextlib.suppress(OSError):
            (lock.parent / f"{key}.failed").write_text(failed)
    return 0 if failed is None else 1


def _compile(spec: dict[str, Any]) -> None:
    """Build the run's update from ``spec`` and compile it once (saved and recorded)."""
    from tensordict import TensorDict  # noqa: PLC0415 - after the priority is lowered

    from typedrl.agents._compiled_update import (  # noqa: PLC0415
        CompiledUpdate,
        CompileRecord,
        measure_update,
    )
    from typedrl.agents._config import PPOConfig  # noqa: PLC0415
    from typedrl.agents._loss import EpochData  # noqa: PLC0415
    from typedrl.agents._ppo import PPOAgent  # noqa: PLC0415
    from typedrl.training import build_optimizer  # noqa: PLC0415

    config = PPOConfig.from_dict(spec["config"])
    observation_space, action_space = (decode_space(space) for space in spec["spaces"])
    dtype = spec["dtype"]
    policy = PPOAgent.build_policy(config, observation_space, action_space).to(dtype)
    policy.load_state_dict(spec["policy"])
    optimizer = build_optimizer(
        list(policy.parameters()),
        name="adam",
        learning_rate=config.learning_rate,
        betas=tuple(spec["adam"]["betas"]),
        eps=spec["adam"]["eps"],
        fused=True,
    )
    tensors = dict(spec["batch"]["tensors"])
    tensors["obs"] = TensorDict(tensors["obs"], batch_size=[spec["batch"]["rows"]])
    batch = EpochData(**tensors)
    record = CompileRecord(Path(spec["record"]))
    spaces = (observation_space, action_space)
    key = CompileRecord.key(config, spaces, spec["batch"]["rows"], dtype=dtype)
    update = CompiledUpdate(policy, optimizer, config, record=(record, lambda _: key))
    update(batch)
    # What it saves per minibatch on this machine: the next run's break-even. The
    # update is saved and recorded by now; a failed measurement leaves the record
    # without a timing (later runs then use the fixed warm threshold), not a failure.
    try:
        timing = measure_update(update, policy, optimizer, config, batch)
    except Exception:  # the compile succeeded; the measurement is extra
        return
    record.add_timing(key, eager_ms=timing.eager_ms, compiled_ms=timing.compiled_ms)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
