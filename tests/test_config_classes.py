"""Every config class of the package: each declared field refuses its invalid values.

The classes are found in the source (every ``__post_init__`` that calls
``_config_fields.validate``), the invalid values derived from each field's
check (:func:`typedrl._config_fields.field_checks`), so a new config or field is
covered without a test of its own. Rules that span fields keep tests of their
own beside their class.
"""

import ast
import dataclasses
import importlib
import json
import math
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import typedrl
from typedrl._config_fields import (
    Check,
    Choice,
    Nested,
    OrNone,
    SequenceOf,
    adam_betas,
    boolean,
    field_checks,
    from_dict,
    non_empty_text,
    text,
    to_dict,
)
from typedrl._results import _objective_scale
from typedrl._validation import (
    MAX_SEED,
    finite_float,
    float_mapping,
    half_open_unit_interval,
    json_object,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    seed_int,
    unit_interval,
)
from typedrl._wrapper_spec import wrapper_text
from typedrl.configs import _file_path, _run_options, _tuned_fields
from typedrl.envs._mjcf_task import _bound, _model_file
from typedrl.envs.newton._task import _keywords, _one_or_per_dof
from typedrl.errors import ConfigError
from typedrl.testing._isaaclab_fake import _int


def _config_classes() -> list[tuple[type[Any], str]]:
    """Every class whose ``__post_init__`` calls ``_config_fields.validate``, with its owner name.

    Found in the package's source, so a new config class is covered without naming it here;
    the package's subclasses of such a class (which inherit the call) are covered too.
    """
    root = Path(typedrl.__file__).parent
    found: list[tuple[type[Any], str]] = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "_config_fields.validate(" not in source:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        module = importlib.import_module(".".join(("typedrl", *parts)).removesuffix(".__init__"))
        for node in ast.parse(source).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for call in ast.walk(node):
                if not (
                    isinstance(call, ast.Call)
                    and ast.unparse(call.func).endswith("_config_fields.validate")
                ):
                    continue
                owner = node.name
                for keyword in call.keywords:
                    if keyword.arg == "owner" and isinstance(keyword.value, ast.Constant):
                        owner = str(keyword.value.value)
                found.append((getattr(module, node.name), owner))
    subclasses = [
        (sub, sub.__name__)
        for cls, _ in found
        for sub in _subclasses(cls)
        # dataclass(slots=True) leaves the class it replaced among the subclasses.
        if sub.__module__.startswith("typedrl.")
        and getattr(importlib.import_module(sub.__module__), sub.__name__, None) is sub
    ]
    return found + [pair for pair in subclasses if pair not in found]


def _subclasses(cls: type[Any]) -> list[type[Any]]:
    return [deep for sub in cls.__subclasses__() for deep in (sub, *_subclasses(sub))]


CONFIG_CLASSES = _config_classes()
_BY_CLASS = [pytest.param(cls, owner, id=cls.__name__) for cls, owner in CONFIG_CLASSES]

_UNLIKE = object()
"""No check accepts an arbitrary object."""

_REFUSED: dict[Check, tuple[object, ...]] = {
    positive_int: (0, -1, True, 2.0, "8"),
    non_negative_int: (-1, False, 1.0),
    seed_int: (-1, MAX_SEED + 1, True, 1.0),
    finite_float: (math.nan, math.inf, True, "0.1"),
    positive_float: (0.0, -1.0, math.nan, True),
    non_negative_float: (-0.1, math.inf, False),
    unit_interval: (-0.01, 1.01, math.nan, True),
    half_open_unit_interval: (1.0, -0.1, True),
    adam_betas: ((0.9,), (0.9, 0.99, 0.999), (0.9, 1.0), (0.9, True), "ab"),
    json_object: ([1, 2], {1: "a"}, {"shape": (1, 2)}, {"x": np.float64(1.0)}),
    boolean: (1, 0, "yes", None),
    text: (3, b"text", None),
    non_empty_text: ("", " ", 3, None),
    _tuned_fields: ([], {"seed": 1}),
    _run_options: ([], {"devices": 2}),
    _file_path: (3, b"tuned.yaml"),
    _int: (True, 1.0, "1"),
    float_mapping: ({"a": math.nan}, {2: 1.0}, 3),
    _objective_scale: (
        -1.0,
        math.inf,
        True,
        torch.ones(3, dtype=torch.int64),
        torch.ones(3, 1),
        torch.ones(0),
        torch.ones(3, requires_grad=True),
        torch.tensor([1.0, -1.0]),
    ),
    _model_file: (3, Path("absent/model.xml")),
    _bound: (0, -1.0, math.nan, -math.inf, True, "1", 10**400),
    _one_or_per_dof: (-1.0, [-1.0], math.nan, True),
    _keywords: ([("floating", True)], {1: True}),
    wrapper_text: (3, None, "", "Frame(4)", "Frame(a=x)", {"name": "Frame"}),
}
"""Values each check of typedrl._validation and _config_fields refuses (its boundaries)."""


def _name(rule: Check) -> str:
    """The test id of a check: a function's name, else the name it is imported under here.

    The ranges (``positive_int``, ``unit_interval``, ...) and ``adam_betas`` are values.
    """
    names = [name for name, value in globals().items() if value is rule]
    return getattr(rule, "__name__", names[0] if names else repr(rule))


@pytest.mark.parametrize(
    ("rule", "refused"),
    [pytest.param(rule, values, id=_name(rule)) for rule, values in _REFUSED.items()],
)
def test_each_check_refuses_its_boundary_values(rule: Check, refused: tuple[object, ...]) -> None:
    """Each check refuses an arbitrary object and its boundary values, naming the field."""
    for value in (_UNLIKE, *refused):
        with pytest.raises(ConfigError, match=r"^Owner\.field\b"):
            rule("Owner", "field", value)


def _refused(rule: Check) -> list[object]:
    """Values ``rule`` must refuse, derived from what it is."""
    values: list[object] = [_UNLIKE]
    if isinstance(rule, OrNone):
        values += [value for value in _refused(rule.rule) if value is not None]
    elif isinstance(rule, SequenceOf):
        values += ["text", *([item] for item in _refused(rule.item))]
        if rule.length is not None:
            values.append([])
    elif isinstance(rule, Choice):
        values += ["<not a choice>", *([1, 0] if True in rule.values else [None])]
    elif not isinstance(rule, Nested):
        values += _REFUSED.get(rule, ())
    return values


def test_the_config_classes_are_found() -> None:
    """The search finds every config of the package (and each once)."""
    names = [cls.__name__ for cls, _ in CONFIG_CLASSES]
    assert len(names) == len(set(names))
    assert set(names) >= {
        "PPOConfig",
        "APGConfig",
        "SHACConfig",
        "AHACConfig",
        "DifferentiableTrainerConfig",
        "RunOptions",
        "RunSettings",
        "TunedConfig",
        "FakeRLEnvCfg",
        "MujocoTaskSpec",
        "NewtonTaskSpec",
    }


_MJCF_TASK = {
    "model_path": Path(typedrl.__file__).parent / "envs" / "mujoco" / "assets" / "cartpole.xml",
    "max_episode_steps": 1,
    "observation_high": (1.0,),
    "observation_normalize_mask": (True,),
    "num_initial_draws": 1,
}
_REQUIRED: dict[str, dict[str, Any]] = {
    "DifferentiableTrainerConfig": {"total_updates": 1},
    "DifferentiableRolloutSpec": {"num_steps": 1},
    "EvaluationResult": {"metrics": {}, "score": 0.0, "num_items": 1},
    "BaseMjcfTaskSpec": _MJCF_TASK,
    "MujocoTaskSpec": _MJCF_TASK,
    "NewtonTaskSpec": {**_MJCF_TASK, "actuated_dofs": (0,), "gear": (1.0,)},
    "TunedConfig": {
        "source": "measured",
        "algo": "ppo",
        "env_id": "CartPole-v1",
        "num_envs": 1,
        "config": {},
    },
}
"""What a class needs beyond its defaults (the trainer config: exactly one budget; a tuned
file and a task spec: their required fields)."""


@pytest.mark.usefixtures("without_runtime_checks")
@pytest.mark.parametrize(("cls", "owner"), _BY_CLASS)
def test_every_field_refuses_its_invalid_values(cls: type[Any], owner: str) -> None:
    """Each field's check, read from its metadata or annotation, refuses its invalid values.

    In the constructor and in from_dict (YAML, --set, checkpoints) alike, with a one-line
    ConfigError whose message starts with ``Owner.field``.
    """
    construct: Callable[..., object] = cls
    failures: list[str] = []
    for field_, rule in field_checks(cls):
        for value in _refused(rule):
            given = {**_REQUIRED.get(cls.__name__, {}), field_.name: value}
            builds = {
                "the constructor": partial(construct, **given),
                "from_dict": partial(from_dict, cls, given, owner=owner),
            }
            failures.extend(
                f"{where}: {problem}"
                for where, build in builds.items()
                if (problem := _refusal(build, owner, field_.name, value))
            )
    assert not failures, "\n".join(failures)


def _refusal(build: Callable[[], object], owner: str, name: str, value: object) -> str:
    """What is wrong with how ``build()`` refuses ``value`` for field ``name`` ("": nothing)."""
    try:
        build()
    except ConfigError as error:
        message = str(error)
        if re.match(rf"{owner}\.{name}\b", message) and "\n" not in message:
            return ""
        return f"{name}={value!r}: {message}"
    return f"{name}={value!r} was accepted"


def _json(data: dict[str, Any]) -> Any:
    """``data`` through JSON, a path as its string (a task spec's model file)."""
    return json.loads(json.dumps(data, default=str))


@pytest.mark.parametrize(("cls", "owner"), _BY_CLASS)
def test_every_config_round_trips_through_json(cls: type[Any], owner: str) -> None:
    """to_dict gives JSON values in field order, and from_dict rebuilds the same config."""
    config = cls(**_REQUIRED.get(cls.__name__, {}))
    data = _json(to_dict(config))
    assert list(data) == [field_.name for field_ in dataclasses.fields(cls)]
    assert _json(to_dict(from_dict(cls, data, owner=owner))) == data
    if hasattr(cls, "from_dict"):
        assert config.to_dict() == data
        assert to_dict(cls.from_dict(data)) == data
