"""What keeping to public APIs costs: each public call against the private one it replaced.

typedrl calls only the public APIs of torch and tensordict. Three per-step or
per-update paths used private ones before; this script times both spellings
in one process, alternated over rounds (median of the per-round ratios), on
one torch thread:

- an observation TensorDict: the public constructor
  (``TensorDict(..., non_blocking=False)``, what the adapters call) against
  writing the instance's ``__dict__`` directly (what they did before);
- the gradient norm and clip of PPO's in-place update:
  ``torch.nn.utils.get_total_norm`` and ``clip_grads_with_norm_`` against
  ``torch._foreach_norm`` and ``torch._foreach_mul_`` on the same gradients
  (bit-identical results, checked);
- SHAC's target-critic update: ``Tensor.lerp_`` per parameter against
  ``torch._foreach_lerp_`` (bit-identical, checked).

It is a refactoring check, not a benchmark of the package: the private
spellings live only here, for the comparison.

    python benchmarks/public_api_overhead.py
    python benchmarks/public_api_overhead.py --json
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict
from torch import nn

from typedrl.envs._spaces import new_tensordict


def _per_call(function: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls


def _compare(
    public: Callable[[], object], private: Callable[[], object], *, calls: int, rounds: int
) -> dict[str, float]:
    """Median seconds per call of each, and the median of the per-round ratios public/private."""
    publics, privates, ratios = [], [], []
    for _ in range(rounds):
        before = _per_call(private, calls)
        after = _per_call(public, calls)
        privates.append(before)
        publics.append(after)
        ratios.append(after / before)
    return {
        "public_us": statistics.median(publics) * 1e6,
        "private_us": statistics.median(privates) * 1e6,
        "ratio": statistics.median(ratios),
    }


def tensordict_construction(*, calls: int, rounds: int) -> dict[str, float]:
    """An 8-row observation TensorDict: the public constructor against a ``__dict__`` write."""
    size, device = torch.Size((8,)), torch.device("cpu")
    leaf = torch.zeros(8, 4)

    def public() -> object:
        return new_tensordict({"obs": leaf}, size, device)

    def private() -> object:
        # The four attributes tensordict 0.15's unchecked constructor sets.
        built: Any = object.__new__(TensorDict)
        built.__dict__ = {
            "_device": device,
            "_tensordict": {"obs": leaf},
            "_batch_size": size,
            "_td_dim_names": None,
        }
        return built

    return _compare(public, private, calls=calls, rounds=rounds)


def _actor_critic() -> list[nn.Parameter]:
    """The parameters of PPO's default actor-critic on a 4-dim observation ([64, 64] tanh)."""
    torch.manual_seed(0)
    nets = [
        nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out))
        for out in (2, 1)
    ]
    parameters = [p for net in nets for p in net.parameters()]
    for parameter in parameters:
        parameter.grad = torch.randn_like(parameter)
    return parameters


def gradient_clip(*, calls: int, rounds: int) -> dict[str, float]:
    """Norm and clip of one update's gradients, in place; checks that both give the same bits."""
    parameters = _actor_critic()
    grads = [p.grad for p in parameters if p.grad is not None]

    def public() -> torch.Tensor:
        norm: torch.Tensor = torch.nn.utils.get_total_norm(grads)
        torch.nn.utils.clip_grads_with_norm_(parameters, 0.5, norm)
        return norm

    def private() -> torch.Tensor:
        norm: torch.Tensor = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        torch._foreach_mul_(grads, (0.5 / (norm + 1e-6)).clamp(max=1.0))
        return norm

    start = [g.clone() for g in grads]
    first = private()
    expected = [g.clone() for g in grads]
    for grad, value in zip(grads, start, strict=True):
        grad.copy_(value)
    second = public()
    if not (torch.equal(first, second) and all(map(torch.equal, grads, expected))):
        raise SystemExit("the public gradient clip changed the result's bits")
    return _compare(public, private, calls=calls, rounds=rounds)


def target_lerp(*, calls: int, rounds: int) -> dict[str, float]:
    """theta' <- alpha * theta' + (1 - alpha) * theta over a critic; checks the bits."""
    sources = [p.detach() for p in _actor_critic()]
    targets = [torch.zeros_like(p) for p in sources]
    weight = 1.0 - 0.995

    def public() -> object:
        for target, source in zip(targets, sources, strict=True):
            target.lerp_(source, weight)
        return targets

    def private() -> object:
        torch._foreach_lerp_(targets, sources, weight)
        return targets

    private()
    expected = [t.clone() for t in targets]
    for target in targets:
        target.zero_()
    public()
    if not all(map(torch.equal, targets, expected)):
        raise SystemExit("the public lerp changed the result's bits")
    return _compare(public, private, calls=calls, rounds=rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="calls per round and spelling")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {
        "tensordict_construction": tensordict_construction(calls=args.calls, rounds=args.rounds),
        "gradient_clip": gradient_clip(calls=args.calls, rounds=args.rounds),
        "target_lerp": target_lerp(calls=args.calls, rounds=args.rounds),
    }
    if args.json:
        print(json.dumps(results))
        return
    for name, result in results.items():
        print(
            f"{name:24s} public {result['public_us']:7.2f} us, private "
            f"{result['private_us']:7.2f} us: {result['ratio']:.2f}x"
        )


if __name__ == "__main__":
    main()
