"""Export a recurrent policy with its rollout state as inputs and outputs (ONNX or TorchScript)."""

import copy
import importlib.util
import logging
import warnings
from pathlib import Path
from typing import Any, Final, Literal, final

import gymnasium as gym
import torch
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl import _validation
from typedrl.checkpoint import StrPath
from typedrl.errors import ConfigError, MissingDependencyError
from typedrl.policies._encoders import flat_keys, key_spaces, layout_width, split_flat
from typedrl.protocols import StatefulActorCritic

__all__ = ["RecurrentDeterministicPolicy", "export_recurrent_policy"]

_ONNX_MODULES: Final = ("onnx", "onnxscript")


@final
class RecurrentDeterministicPolicy(nn.Module):
    """A recurrent policy's deterministic step: ``(obs, *state) -> (action, *next_state)``.

    ``obs`` is the flat observation ``[batch, obs_dim]`` (every key of the
    observation space, each flattened, in the space's order, an index as one
    column); each state entry is ``[batch, *shape]`` in the order of
    :attr:`state_keys` (the policy's ``state_specs``). Start an episode from
    zeros (:meth:`initial_state`) and feed each step's next state back in;
    reset a row's state when its episode ends. Normalisation lives inside the
    policy, so it is baked in. The module holds a copy of the policy.

    Example:
        >>> import gymnasium as gym, torch
        >>> from typedrl.policies import RecurrentActorCritic
        >>> space = gym.spaces.Box(-1, 1, (2,))
        >>> policy = RecurrentActorCritic(space, gym.spaces.Discrete(2), core="lstm")
        >>> step = RecurrentDeterministicPolicy(policy, space)
        >>> action, h, c = step(torch.zeros(3, 2), *step.initial_state(3))
        >>> step.state_keys, action.shape, h.shape
        (('h', 'c'), torch.Size([3]), torch.Size([3, 1, 64]))
    """

    def __init__(self, policy: StatefulActorCritic, observation_space: gym.Space[Any]) -> None:
        super().__init__()
        self.obs_dim = layout_width(
            observation_space, tuple(key_spaces(observation_space)), "RecurrentDeterministicPolicy"
        )
        """Width of the flat observation input."""
        self._keys = flat_keys(observation_space)
        self.state_keys: tuple[str, ...] = tuple(policy.state_specs)
        """The state's entries, in the order of the inputs and outputs after the observation."""
        self.state_shapes: tuple[tuple[int, ...], ...] = tuple(
            policy.state_specs[key].shape for key in self.state_keys
        )
        """Each state entry's per-row shape."""
        self.policy = copy.deepcopy(policy)
        # Evaluation mode throughout, as the exporters expect.
        self.train(mode=False)

    def initial_state(self, batch: int) -> tuple[Tensor, ...]:
        """Zeros for every state entry, ``[batch, *shape]`` each (an episode's start)."""
        initial = self.policy.initial_state(batch, device=torch.device("cpu"))
        return tuple(initial[key] for key in self.state_keys)

    # Traced by torch.jit.trace and torch.export: no runtime checks inside.
    @_validation.no_type_check
    def forward(self, obs: Tensor, *state: Tensor) -> tuple[Tensor, ...]:
        """The deterministic action and the next state for each row."""
        batch = obs.shape[0]
        leaves = split_flat(obs, self._keys)
        current = TensorDict(dict(zip(self.state_keys, state, strict=True)), batch_size=[batch])
        outputs = self.policy.act_step(
            TensorDict(leaves, batch_size=[batch]), current, deterministic=True
        )
        return (outputs["action"], *(outputs["state", key] for key in self.state_keys))


def export_recurrent_policy(
    model: RecurrentDeterministicPolicy,
    path: StrPath,
    *,
    export_format: Literal["onnx", "torchscript"] = "onnx",
) -> Path:
    """Write ``model`` to ``path`` as ONNX or TorchScript, the state as inputs and outputs.

    ONNX inputs are ``"obs"`` and each state key; outputs ``"action"`` and
    ``"next_<key>"`` for each state key; the batch axis is dynamic.

    Raises:
        MissingDependencyError: ONNX export without ``onnx`` and ``onnxscript``.
        ConfigError: The exporter cannot trace the policy (one line).
    """
    target = Path(path)
    example = (torch.zeros(2, model.obs_dim), *model.initial_state(2))
    if export_format == "onnx":
        missing = [name for name in _ONNX_MODULES if importlib.util.find_spec(name) is None]
        if missing:
            raise MissingDependencyError(
                f"ONNX export needs {' and '.join(missing)}: pip install 'typedrl[onnx]'"
            )
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # TorchScript and its exporters are deprecated and warn about their internals;
            # TensorDict's shape checks read the traced batch size, deciding nothing traced.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            # torch.export's handling of nn.GRU / nn.LSTM warns about its own internals (the
            # cells' flat weight list, non-leaf .grad reads); the tests check the file.
            warnings.simplefilter("ignore", UserWarning)
            warnings.filterwarnings(
                "ignore", message="Converting a tensor to a Python", module=r"tensordict\."
            )
            if export_format == "onnx":
                batch = torch.export.Dim("batch")
                torch.onnx.export(
                    model,
                    example,
                    str(target),
                    dynamo=True,
                    external_data=False,
                    input_names=["obs", *model.state_keys],
                    output_names=["action", *(f"next_{key}" for key in model.state_keys)],
                    # forward(obs, *state): the state entries are one (varargs) input.
                    dynamic_shapes=({0: batch}, tuple({0: batch} for _ in example[1:])),
                    verbose=False,
                )
            else:
                traced = torch.jit.trace(model, example)  # type: ignore[no-untyped-call]
                torch.jit.save(traced, str(target))
    except (RuntimeError, TypeError, ValueError) as error:
        lines = str(error).strip().splitlines()
        raise ConfigError(
            f"the recurrent policy does not export as {export_format} ({type(error).__name__}: "
            f"{lines[0] if lines else ''}); its act_step must be traceable tensor code"
        ) from error
    finally:
        registration.setLevel(level)
    return target
