"""One line that says what a policy is: its class, its size, its image encoders and its core."""

from torch import nn

from typedrl.policies._encoders import ImageEncoder

__all__ = ["describe_policy"]


def describe_policy(policy: object) -> str:
    """The policy's class and parameter count, then each image encoder and recurrent core.

    The parts after the colon are separated by ``"; "``.

    Any module is described: its :class:`~typedrl.policies.ImageEncoder` and
    ``nn.GRU``/``nn.LSTM`` submodules are found wherever they sit (a module
    shared by the actor and the critic counts once), so the line shows what
    ``encoder: auto`` chose for the env's spaces.

    Example:
        >>> import gymnasium as gym, numpy as np
        >>> from typedrl.policies import RecurrentActorCritic
        >>> space = gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)
        >>> policy = RecurrentActorCritic(space, gym.spaces.Discrete(3))
        >>> for part in describe_policy(policy).split("; "):
        ...     print(part)
        RecurrentActorCritic, 187,572 parameters: small CNN on 7x7x3 images (128 features)
        GRU core (64 wide, 1 layer)
    """
    if not isinstance(policy, nn.Module):
        return type(policy).__name__
    count = sum(parameter.numel() for parameter in policy.parameters())
    parts: list[str] = []
    for module in policy.modules():
        if isinstance(module, ImageEncoder):
            shape = "x".join(str(side) for side in module.shape)
            parts.append(f"{module.kind} CNN on {shape} images ({module.features} features)")
        elif isinstance(module, nn.GRU | nn.LSTM):
            layers = f"{module.num_layers} layer{'s' if module.num_layers > 1 else ''}"
            parts.append(f"{module.mode} core ({module.hidden_size} wide, {layers})")
    head = f"{type(policy).__name__}, {count:,} parameters"
    return f"{head}: {'; '.join(parts)}" if parts else head
