"""Tests for typedrl._config_fields: declared checks, the generic validator and serialiser."""

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from typedrl._config_fields import (
    at_most,
    check,
    from_dict,
    optional,
    plain,
    sequence_of,
    to_dict,
    validate,
)
from typedrl._validation import (
    positive_float,
    positive_int,
)
from typedrl.apg import APGConfig, DifferentiableTrainerConfig, SHACConfig
from typedrl.cli import main
from typedrl.errors import ConfigError
from typedrl.ppo import PPOConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class Inner:
    size: int = field(default=1, metadata=check(positive_int))

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class Other:
    width: int = field(default=2, metadata=check(positive_int))

    def __post_init__(self) -> None:
        validate(self)


def _default_inner() -> Inner:
    return Inner(size=5)


@dataclass(frozen=True, slots=True, kw_only=True)
class Demo:
    flag: bool = False
    name: str = "demo"
    mode: Literal["fast", "slow"] = "fast"
    auto: bool | Literal["auto"] = "auto"
    maybe: Literal["a", "b"] | None = None
    rate: float = field(default=0.5, metadata=check(positive_float))
    limit: float | None = field(default=None, metadata=check(optional(positive_float)))
    sizes: tuple[int, ...] = field(
        default=(64,), metadata=check(sequence_of(positive_int, expected="a list of sizes"))
    )
    inner: Inner = field(default_factory=_default_inner)
    either: Inner | Other = field(default_factory=Inner)

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class Undeclared:
    count: int = 3

    def __post_init__(self) -> None:
        validate(self)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"flag": 1}, r"Demo\.flag must be a bool, got 1 \(type int\)"),
        ({"name": 3}, r"Demo\.name must be a str, got 3"),
        ({"mode": "medium"}, r"Demo\.mode must be one of \['fast', 'slow'\], got 'medium'"),
        ({"auto": 0}, r"Demo\.auto must be one of \[True, False, 'auto'\], got 0"),
        ({"maybe": "c"}, r"Demo\.maybe must be one of \['a', 'b'\], got 'c'"),
        ({"rate": 0.0}, r"Demo\.rate must be > 0, got 0\.0"),
        ({"rate": "fast"}, r"Demo\.rate must be a finite float, got 'fast' \(type str\)"),
        ({"limit": -1.0}, r"Demo\.limit must be > 0"),
        ({"sizes": 64}, r"Demo\.sizes must be a list of sizes, got 64"),
        ({"sizes": (64, 0)}, r"Demo\.sizes\[1\] must be a positive int, got 0"),
        ({"inner": {"size": 2}}, r"Demo\.inner must be an Inner, got \{'size': 2\}"),
        ({"either": None}, r"Demo\.either must be an Inner or an Other, got None"),
    ],
)
def test_each_field_is_checked_by_its_annotation_or_its_metadata(
    values: dict[str, Any], message: str
) -> None:
    """bool, str, Literal, config and union fields need no metadata; the others declare it."""
    with pytest.raises(ConfigError, match=message):
        Demo(**values)


def test_valid_values_are_normalised_and_kept() -> None:
    """Ints become floats and lists tuples; None passes an optional check; choices pass."""
    demo = Demo(flag=True, auto=False, maybe="b", rate=2, limit=None, sizes=[8, 4])  # type: ignore[arg-type]
    assert (demo.flag, demo.auto, demo.maybe, demo.limit) == (True, False, "b", None)
    assert demo.rate == 2.0
    assert type(demo.rate) is float
    assert demo.sizes == (8, 4)


def test_a_field_without_a_check_is_a_type_error() -> None:
    """An int field with no metadata is the config's author's mistake, named at once."""
    with pytest.raises(TypeError, match=r"Undeclared\.count: the annotation <class 'int'>"):
        Undeclared()


def test_to_dict_gives_json_like_values_in_field_order() -> None:
    """Tuples become lists and nested configs dicts; keys keep the declaration order."""
    data = to_dict(Demo(sizes=(1, 2), either=Other(width=3)))
    assert list(data) == [f.name for f in dataclasses.fields(Demo)]
    assert data["sizes"] == [1, 2]
    assert data["inner"] == {"size": 5}
    assert data["either"] == {"width": 3}
    assert json.loads(json.dumps(data)) == data


def test_from_dict_round_trips_and_builds_nested_configs() -> None:
    """Nested mappings become configs: the class whose fields they name, over the default."""
    demo = Demo(flag=True, sizes=(3,), inner=Inner(size=7), either=Other(width=4))
    assert from_dict(Demo, json.loads(json.dumps(to_dict(demo)))) == demo
    # A partial mapping keeps the field's own default (size 5), not the class's (size 1).
    assert from_dict(Demo, {"inner": {}}).inner == Inner(size=5)
    assert from_dict(Demo, {"either": {"width": 9}}).either == Other(width=9)
    assert from_dict(Demo, {"either": {}}).either == Inner()  # a tie: the first class


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"nmae": "x"}, r"^Demo has no fields \['nmae'\]; valid fields: \['auto', 'either', "),
        ({1: "x"}, r"^Demo has no fields \['1'\]"),
        ([("flag", True)], r"^Demo must be a mapping of field names to values, got \["),
        ({"inner": {"sise": 2}}, r"^Inner has no fields \['sise'\]; valid fields: \['size'\]"),
        ({"inner": {"size": "2"}}, r"^Inner\.size must be a positive int, got '2'"),
        ({"sizes": ["a"]}, r"^Demo\.sizes\[0\] must be a positive int, got 'a'"),
    ],
)
def test_from_dict_refuses_what_the_fields_do_not_accept(data: Any, message: str) -> None:
    """Unknown keys list the valid ones; each value passes its check before the class is built."""
    with pytest.raises(ConfigError, match=message):
        from_dict(Demo, data)


def _old_layout(config: Any) -> dict[str, Any]:
    """How the hand-written to_dict methods laid a config out: asdict, tuples as lists."""

    def lists(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: lists(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [lists(item) for item in value]
        return value

    result: dict[str, Any] = lists(dataclasses.asdict(config))
    return result


_CONFIGS: list[Any] = [
    PPOConfig(),
    PPOConfig(actor_hidden=(8,), target_kl=0.1, compile=True, extra={"a": [1, {"b": 2}]}),
    APGConfig(),
    APGConfig(betas=(0.5, 0.6), learning_rate_schedule="cosine", max_grad_norm=None),
    SHACConfig(),
    DifferentiableTrainerConfig(total_updates=3),
    DifferentiableTrainerConfig(
        total_timesteps=100, hidden=(4, 4), algorithm=SHACConfig(critic_hidden=(3,))
    ),
]


@pytest.mark.parametrize("config", _CONFIGS, ids=lambda config: type(config).__name__)
def test_the_dict_layout_of_every_config_is_unchanged(config: Any) -> None:
    """Checkpoints and config.yaml hold to_dict(): the same keys, order and values as before."""
    data = config.to_dict()
    assert data == _old_layout(config)
    assert list(data) == list(_old_layout(config))
    assert type(config).from_dict(data) == config


def test_a_stored_shac_trainer_config_loads() -> None:
    """A trainer config dict as checkpoints have stored it rebuilds a SHAC config."""
    stored = _old_layout(DifferentiableTrainerConfig(total_updates=5, algorithm=SHACConfig()))
    config = DifferentiableTrainerConfig.from_dict(json.loads(json.dumps(stored)))
    assert isinstance(config.algorithm, SHACConfig)
    assert config.algorithm.actor == SHACConfig().actor
    assert config.to_dict() == stored


def test_set_with_a_wrong_type_prints_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``--set gamma=high`` fails with one line naming the field, then the --debug hint."""
    assert main(["train", "--set", "gamma=high", "--print-config"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "typedrl: ConfigError: PPOConfig.gamma must be a finite float, got 'high' (type str)",
        "(run with --debug for the traceback)",
    ]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            lambda: PPOConfig(min_learning_rate=1.0, max_learning_rate=0.5),
            r"PPOConfig.min_learning_rate \(1.0\) must not exceed max_learning_rate \(0.5\)",
        ),
        (
            lambda: APGConfig(min_learning_rate=1.0, learning_rate=0.5),
            r"APGConfig.min_learning_rate \(1.0\) must not exceed learning_rate \(0.5\)",
        ),
        (
            lambda: SHACConfig(critic_min_learning_rate=1.0, critic_learning_rate=0.5),
            r"SHACConfig.critic_min_learning_rate \(1.0\) must not exceed critic_learning_rate",
        ),
    ],
)
def test_a_minimum_above_its_maximum_is_named(config: Any, message: str) -> None:
    """at_most: the configs refuse a minimum learning rate above the rate it decays from."""
    with pytest.raises(ConfigError, match=message):
        config()
    at_most(Demo(rate=0.5), "rate", "rate")


def test_plain_compares_configs_documents_and_tuples_by_content() -> None:
    """plain: configs become dicts and tuples lists, recursively, mappings dicts."""
    assert plain(Inner(size=3)) == {"size": 3}
    assert plain({"a": (1, (2, 3))}) == {"a": [1, [2, 3]]}
    assert plain(to_dict(Demo())) == plain(Demo())
