"""The DifferentiableVecEnv rules: gradient paths and cuts, detach_state, finite differences."""

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl.envs._checker._actions import ActionSampler
from typedrl.envs._checker._observations import equal_rows, host, leaves, row_list, show
from typedrl.envs._checker._report import Recorder
from typedrl.envs._checker._vec import EnvContext, StepParts, done_rows, unpack_step

__all__ = ["FiniteDifferenceOptions", "check_gradients"]

#: Steps tried to find a row that does not end, for the gradient-path rules.
_PATH_TRIES = 8
#: Episode ends whose reset rows are checked for gradient leaks.
_RESET_EVENTS = 2


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class FiniteDifferenceOptions:
    """Settings of the finite-difference rule (validated by the public entry point)."""

    horizon: int
    """Steps after a seeded reset whose summed reward is differentiated."""

    entries: int
    """Action numbers probed."""

    eps: float | None
    """Perturbation; ``None`` scales it to the action bounds and dtype."""

    rtol: float | None
    """Relative tolerance; ``None`` picks one from the reward dtype."""

    atol: float | None
    """Absolute tolerance; ``None`` picks one from the reward dtype."""


def _reset(ctx: EnvContext, seed: int) -> TensorDict:
    outcome = ctx.env.reset(seed=seed)
    obs = outcome[0] if isinstance(outcome, tuple | list) and outcome else outcome
    if not isinstance(obs, TensorDict):
        raise TypeError(f"reset returned {show(outcome)}, not (TensorDict, dict)")
    return obs


def _step(ctx: EnvContext, action: Tensor) -> StepParts:
    outcome = ctx.env.step(action)
    parts = unpack_step(outcome)
    if parts is None:
        raise TypeError(f"step returned {show(outcome)}, not a StepResult")
    return parts


def _alive(parts: StepParts, num_envs: int) -> Tensor:
    done = done_rows(parts, num_envs)
    return torch.ones(num_envs, dtype=torch.bool) if done is None else ~done


def _float_leaves(obs: object) -> dict[str, Tensor]:
    if not isinstance(obs, TensorDict):
        return {}
    return {name: leaf for name, leaf in leaves(obs).items() if leaf.is_floating_point()}


def _grads(output: Tensor, inputs: Sequence[Tensor]) -> list[Tensor | None]:
    """Gradients of a scalar ``output``; ``None`` for inputs it does not depend on."""
    if not output.requires_grad:
        return [None] * len(inputs)
    return list(torch.autograd.grad(output, inputs, retain_graph=True, allow_unused=True))


def _any_nonzero(grads: Sequence[Tensor | None]) -> bool:
    return any(g is not None and bool((g != 0).any()) for g in grads)


def _path_problem(outputs: dict[str, object], action: Tensor, alive: Tensor) -> str | None:
    """Why ``outputs`` (rows ``alive``) show no gradient w.r.t. ``action``; ``None`` if they do."""
    tensors = {k: v for k, v in outputs.items() if isinstance(v, Tensor) and v.is_floating_point()}
    if not tensors:
        return f"no floating-point tensor among {sorted(outputs)}"
    graphed = {k: v for k, v in tensors.items() if v.requires_grad}
    if not graphed:
        return (
            f"{sorted(tensors)} without an autograd graph (requires_grad=False): computed from "
            "detached tensors, under torch.no_grad(), or through numpy"
        )
    total = sum(v[alive.to(v.device)].sum() for v in graphed.values())
    if not isinstance(total, Tensor):
        return "no row that did not end"
    (grad,) = _grads(total, [action])
    if grad is None:
        return f"{sorted(graphed)} with no path to the action in the graph (autograd.grad: None)"
    if not bool((grad[alive.to(grad.device)] != 0).any()):
        return f"an all-zero gradient of {sorted(graphed)} w.r.t. the action"
    return None


def _check_paths(rec: Recorder, ctx: EnvContext, sampler: ActionSampler, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    problems: dict[str, str | None] = {
        "grad.reward": "no step with a row that did not end",
        "grad.obs": "no step with a row that did not end",
    }
    with rec.guard("grad.reward", what="stepping with an action that requires grad"):
        rec.ran("grad.obs")
        _reset(ctx, seed)
        for _ in range(_PATH_TRIES):
            action = sampler.inner(generator).requires_grad_()
            parts = _step(ctx, action)
            alive = _alive(parts, ctx.num_envs)
            if not bool(alive.any()):
                continue
            if problems["grad.reward"] is not None:
                problems["grad.reward"] = _path_problem({"reward": parts.reward}, action, alive)
            if problems["grad.obs"] is not None:
                with rec.guard("grad.obs", what="differentiating the observation"):
                    problems["grad.obs"] = _path_problem(
                        dict(_float_leaves(parts.obs)), action, alive
                    )
            if all(problem is None for problem in problems.values()):
                break
        for rule, what in (("grad.reward", "reward"), ("grad.obs", "next observation")):
            problem = problems[rule]
            if problem is not None and not rec.failed(rule):
                rec.fail(
                    rule,
                    f"expected the {what} of rows that did not end to have a nonzero gradient "
                    f"w.r.t. the action on some of {_PATH_TRIES} steps, got {problem}",
                )


def _check_reset_cut(
    rec: Recorder, ctx: EnvContext, sampler: ActionSampler, seed: int, num_steps: int
) -> None:
    generator = torch.Generator().manual_seed(seed + 1)
    with rec.guard("grad.reset", what="stepping through autoresets", mark_run=False):
        _reset(ctx, seed)
        actions: list[Tensor] = []
        pending: Tensor | None = None
        events = 0
        for step in range(num_steps):
            action = sampler.inner(generator).requires_grad_()
            actions.append(action)
            parts = _step(ctx, action)
            if pending is not None and isinstance(parts.reward, Tensor):
                # The first reward of a new episode depends on its reset state and this action only.
                _check_rows_free(
                    rec,
                    {"reward": parts.reward},
                    rows=pending,
                    actions=actions[:-1],
                    step=step,
                    what="reward",
                )
            done = done_rows(parts, ctx.num_envs)
            pending = None
            if done is not None and bool(done.any()):
                rec.ran("grad.reset")
                _check_rows_free(
                    rec, _float_leaves(parts.obs), rows=done, actions=actions, step=step, what="obs"
                )
                pending, events = done, events + 1
            elif events >= _RESET_EVENTS:
                break


def _check_rows_free(
    rec: Recorder,
    outputs: dict[str, Tensor],
    *,
    rows: Tensor,
    actions: Sequence[Tensor],
    step: int,
    what: str,
) -> None:
    """Report rows of ``outputs`` that have a gradient w.r.t. ``actions``."""
    leaking = torch.zeros_like(rows)
    for row in torch.nonzero(rows).flatten().tolist()[:8]:
        for value in outputs.values():
            if value.requires_grad and _any_nonzero(_grads(value[row].sum(), actions)):
                leaking[row] = True
    if bool(leaking.any()):
        earlier = "the actions up to this step" if what == "obs" else "actions before the reset"
        rec.fail(
            "grad.reset",
            f"expected rows reset by the step to carry no gradient w.r.t. earlier actions, got "
            f"a nonzero gradient of the {what} of rows {row_list(leaking)} w.r.t. {earlier}; "
            "build the new initial state from detached tensors",
            step=step,
            key=what,
        )


def _check_detach(rec: Recorder, ctx: EnvContext, sampler: ActionSampler, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed + 2)
    before: list[Tensor] = []
    detached_ok = False
    with rec.guard("detach.values", what="detach_state()"):
        _reset(ctx, seed)
        last: object = None
        for _ in range(2):
            before.append(sampler.inner(generator).requires_grad_())
            last = _step(ctx, before[-1]).obs
        returned = ctx.env.detach_state()
        detached_ok = _detached_like(rec, returned, last)
    if not detached_ok:
        return
    with rec.guard("detach.cut", what="stepping after detach_state()"):
        parts = _step(ctx, sampler.inner(generator).requires_grad_())
        outputs: dict[str, object] = {"reward": parts.reward, **_float_leaves(parts.obs)}
        leaking = [
            name
            for name, value in outputs.items()
            if isinstance(value, Tensor) and _any_nonzero(_grads(value.sum(), before))
        ]
        if leaking:
            rec.fail(
                "detach.cut",
                f"expected no gradient w.r.t. actions taken before detach_state(), got one for "
                f"{leaking} of the next step; detach the internal state, not only the returned obs",
                key=leaking[0],
            )


def _detached_like(rec: Recorder, returned: object, last: object) -> bool:
    """Check the detach.values rule; return whether the env is fit for the detach.cut rule."""
    if not isinstance(returned, TensorDict) or not isinstance(last, TensorDict):
        rec.fail(
            "detach.values",
            f"expected detach_state() to return the last observation as a TensorDict, "
            f"got {show(returned)}",
        )
        return False
    want, got = leaves(last), leaves(returned)
    if sorted(want) != sorted(got):
        rec.fail("detach.values", f"expected keys {sorted(want)}, got {sorted(got)}")
        return False
    fine = True
    for name in sorted(want):
        a, b = host(want[name]), host(got[name])
        if got[name].requires_grad:
            fine = False
            rec.fail(
                "detach.values",
                "expected a leaf without autograd graph, got requires_grad=True",
                key=name,
            )
        if a is None or b is None:
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            fine = False
            rec.fail(
                "detach.values",
                f"expected the last observation's {a.dtype} {list(a.shape)}, got "
                f"{b.dtype} {list(b.shape)}",
                key=name,
            )
        elif not bool(equal_rows(a, b).all()):
            fine = False
            rows = ~equal_rows(a, b)
            gap = float((a[rows].double() - b[rows].double()).abs().nan_to_num(float("inf")).max())
            rec.fail(
                "detach.values",
                f"expected the values of the last observation, got different values in rows "
                f"{row_list(rows)} (max |difference| {gap:.3g}); detach_state() must not step, "
                "reset or resample anything",
                key=name,
            )
    return fine


@final
class _Objective:
    """The reward summed over a fixed action sequence from a seeded reset, in float64."""

    def __init__(self, ctx: EnvContext, seed: int) -> None:
        self._ctx = ctx
        self._seed = seed
        self.reward_dtypes: set[torch.dtype] = set()

    def __call__(self, actions: Sequence[Tensor]) -> tuple[Tensor, list[Tensor | None]]:
        """Return the summed reward and each step's done rows."""
        _reset(self._ctx, self._seed)
        total = torch.zeros((), dtype=torch.float64, device=self._ctx.device)
        dones = []
        for action in actions:
            parts = _step(self._ctx, action)
            if not isinstance(parts.reward, Tensor):
                raise TypeError(f"reward is {show(parts.reward)}")
            self.reward_dtypes.add(parts.reward.dtype)
            total = total + parts.reward.to(torch.float64).sum()
            dones.append(done_rows(parts, self._ctx.num_envs))
        return total, dones


def _check_finite_differences(
    rec: Recorder,
    ctx: EnvContext,
    sampler: ActionSampler,
    seed: int,
    options: FiniteDifferenceOptions,
) -> None:
    rule = "grad.finite_difference"
    generator = torch.Generator().manual_seed(seed + 3)
    base = [sampler.inner(generator) for _ in range(options.horizon)]
    objective = _Objective(ctx, seed)
    with rec.guard(rule, what="differentiating the summed reward", mark_run=False):
        probes = [a.clone().requires_grad_() for a in base]
        total, dones = objective(probes)
        if not total.requires_grad:
            return  # grad.reward reports the missing graph.
        grads = _grads(total, probes)
        with torch.no_grad():
            again, _ = objective(base)
        if not bool(torch.isclose(again, total.detach(), rtol=1e-9, atol=0.0)):
            return  # not reproducible: the seeding rule reports it.
        tight = objective.reward_dtypes == {torch.float64} and sampler.dtype == torch.float64
        rtol = options.rtol if options.rtol is not None else (1e-5 if tight else 5e-2)
        atol = options.atol if options.atol is not None else (1e-8 if tight else 5e-3)
        widths = sampler.half_widths()
        numel = base[0].numel()
        mismatches = []
        for index in range(options.entries):
            step = index % options.horizon
            flat = int(torch.randint(numel, (1,), generator=generator))
            width = widths[flat % len(widths)]
            eps = options.eps if options.eps is not None else (1e-6 if tight else 1e-3) * width
            if eps <= 0:
                continue
            plus, minus = list(base), list(base)
            plus[step] = _nudge(base[step], flat, eps)
            minus[step] = _nudge(base[step], flat, -eps)
            with torch.no_grad():
                high, high_dones = objective(plus)
                low, low_dones = objective(minus)
            if not (_same_dones(high_dones, dones) and _same_dones(low_dones, dones)):
                continue  # an episode end moved: the objective is not smooth here.
            rec.ran(rule)
            delta = float(plus[step].reshape(-1)[flat]) - float(minus[step].reshape(-1)[flat])
            numeric = (float(high) - float(low)) / delta
            grad = grads[step]
            analytic = float(grad.reshape(-1)[flat]) if grad is not None else 0.0
            if abs(numeric - analytic) > atol + rtol * max(abs(numeric), abs(analytic)):
                row, col = divmod(flat, max(numel // ctx.num_envs, 1))
                mismatches.append(
                    f"step {step} row {row} entry {col}: autograd {analytic:.6g}, "
                    f"finite differences {numeric:.6g} (eps {eps:.3g})"
                )
        if mismatches:
            rec.fail(
                rule,
                f"expected autograd to match central differences (rtol {rtol:g}, atol {atol:g}) "
                f"of the reward summed over {options.horizon} steps after reset(seed={seed}), "
                f"got {'; '.join(mismatches)}; check custom backward passes",
            )


def _nudge(action: Tensor, flat: int, eps: float) -> Tensor:
    moved = action.clone()
    moved.view(-1)[flat] += eps
    return moved


def _same_dones(first: Sequence[Tensor | None], second: Sequence[Tensor | None]) -> bool:
    return all(
        a is not None and b is not None and torch.equal(a, b)
        for a, b in zip(first, second, strict=True)
    )


def _check_normalize_mask(rec: Recorder, ctx: EnvContext) -> None:
    sentinel = object()
    if inspect.getattr_static(ctx.env, "observation_normalize_mask", sentinel) is sentinel:
        return
    with rec.guard("normalize_mask", what="reading observation_normalize_mask"):
        mask = ctx.env.observation_normalize_mask
        shapes = [spec.shape for spec in (ctx.spec or {}).values()]
        obs_dim = shapes[0][0] if len(shapes) == 1 and len(shapes[0]) == 1 else None
        want = f"[{obs_dim}] (obs_dim)" if obs_dim is not None else "[obs_dim]"
        if (
            not isinstance(mask, Tensor)
            or mask.dtype != torch.bool
            or mask.ndim != 1
            or (obs_dim is not None and mask.shape[0] != obs_dim)
        ):
            got = f"{mask.dtype} {list(mask.shape)}" if isinstance(mask, Tensor) else show(mask)
            rec.fail("normalize_mask", f"expected a torch.bool tensor {want}, got {got}")


def check_gradients(
    rec: Recorder,
    ctx: EnvContext,
    sampler: ActionSampler,
    *,
    seed: int,
    num_steps: int,
    finite_differences: FiniteDifferenceOptions,
) -> None:
    """Run every differentiable-env rule; each rule is guarded on its own."""
    _check_normalize_mask(rec, ctx)
    _check_paths(rec, ctx, sampler, seed)
    _check_reset_cut(rec, ctx, sampler, seed, num_steps)
    _check_detach(rec, ctx, sampler, seed)
    _check_finite_differences(rec, ctx, sampler, seed, finite_differences)
