"""Tests for typedrl.algorithms: the registry of (config, trainer) that --algo names."""

from pathlib import Path

import pytest

from tests.cli.random_search import ALGORITHM, RandomSearch, RandomSearchConfig
from typedrl import algorithms
from typedrl.ahac import AHACConfig
from typedrl.algorithms import (
    BUILTIN_ALGORITHMS,
    ENTRY_POINT_GROUP,
    algorithm_names,
    find_algorithm,
    get_algorithm,
    register_algorithm,
    unregister_algorithm,
)
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.cli import main
from typedrl.errors import ConfigError
from typedrl.ppo import PPOAgent, PPOConfig


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry of typedrl's algorithms only, restored afterwards."""
    get_algorithm("ppo")  # typedrl's own are registered
    builtins = {name: algorithms._registry[name] for name in BUILTIN_ALGORITHMS}
    monkeypatch.setattr(algorithms, "_registry", dict(builtins))
    monkeypatch.setattr(algorithms, "_sources", dict.fromkeys(builtins, "typedrl"))
    monkeypatch.setattr(algorithms, "_state", {"builtins": True, "entry_points": False})


def _site(tmp_path: Path, entry: str) -> Path:
    dist = tmp_path / "site" / "typedrl_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: typedrl-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry}\n")
    return tmp_path / "site"


@pytest.mark.usefixtures("registry")
def test_typedrl_registers_ppo_apg_shac_and_ahac() -> None:
    """The built-in algorithms, their classes and kinds; APG, SHAC and AHAC share a trainer."""
    assert algorithm_names() == ("ppo", "apg", "shac", "ahac")
    ppo = get_algorithm("ppo")
    assert (ppo.config, ppo.trainer, ppo.kind, ppo.differentiable) == (
        PPOConfig,
        PPOAgent,
        "ppo",
        False,
    )
    assert get_algorithm("shac").trainer is get_algorithm("apg").trainer is DifferentiableTrainer
    assert get_algorithm("ahac").trainer is DifferentiableTrainer
    with pytest.raises(
        ConfigError, match=r"algo must be one of \['ppo', 'apg', 'shac', 'ahac'\], got 'sac'"
    ):
        get_algorithm("sac")


@pytest.mark.usefixtures("registry")
def test_a_checkpoint_kind_finds_its_algorithm() -> None:
    """A kind shared by APG, SHAC and AHAC is told apart by the saved config."""
    shac = DifferentiableTrainerConfig.from_dict({"total_updates": 1, "algorithm": {"actor": {}}})
    apg = DifferentiableTrainerConfig(total_updates=1)
    ahac = DifferentiableTrainerConfig(total_updates=1, algorithm=AHACConfig())
    assert find_algorithm(kind="apg", config=shac.to_dict()).name == "shac"
    assert find_algorithm(kind="apg", config=ahac.to_dict()).name == "ahac"
    assert find_algorithm(kind="apg", config=apg.to_dict()).name == "apg"
    assert find_algorithm(kind="ppo", config={}).name == "ppo"
    with pytest.raises(ConfigError, match=r"no registered algorithm writes checkpoints of kind"):
        find_algorithm(kind="random_search", config={})


@pytest.mark.usefixtures("registry")
def test_register_algorithm_from_python(capsys: pytest.CaptureFixture[str]) -> None:
    """A registered trainer is an --algo choice; its kind finds it; it can be removed again."""
    spec = register_algorithm(
        "search",
        config=RandomSearchConfig,
        trainer=RandomSearch,
        default_env_id="typedrl/CartPole-v0",
    )
    assert algorithm_names()[-1] == "search"
    assert find_algorithm(kind="random_search", config={}) is spec
    assert main(["train", "--algo", "search", "--set", "noise=0.25", "--print-config"]) == 0
    printed = capsys.readouterr().out
    assert "algo: search\n" in printed
    assert "  noise: 0.25\n" in printed
    unregister_algorithm("search")
    assert "search" not in algorithm_names()


@pytest.mark.usefixtures("registry")
def test_names_and_classes_are_checked() -> None:
    """typedrl's names stay theirs; a name is taken once; fields are validated."""
    with pytest.raises(ConfigError, match=r"'ppo' is typedrl's own"):
        register_algorithm("ppo", config=RandomSearchConfig, trainer=RandomSearch)
    register_algorithm("search", config=RandomSearchConfig, trainer=RandomSearch)
    with pytest.raises(ConfigError, match=r"'search' is already registered .*replace=True"):
        register_algorithm(
            "search", config=RandomSearchConfig, trainer=RandomSearch, description="x"
        )
    register_algorithm("search", config=RandomSearchConfig, trainer=RandomSearch, replace=True)
    with pytest.raises(
        ConfigError, match=r"name must be a lower-case identifier .*, got 'My Search'"
    ):
        register_algorithm("My Search", config=RandomSearchConfig, trainer=RandomSearch)
    with pytest.raises(ConfigError, match=r"trainer must be a subclass of .*AbstractTrainer"):
        register_algorithm("other", config=RandomSearchConfig, trainer=dict)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"int has no from_dict\(values\); give one, or pass"):
        register_algorithm("other", config=int, trainer=RandomSearch)
    with pytest.raises(ConfigError, match=r"one of typedrl's algorithms and stays registered"):
        unregister_algorithm("apg")


@pytest.mark.usefixtures("registry")
def test_an_entry_point_registers_an_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's entry points are loaded on the first lookup of a name typedrl lacks."""
    monkeypatch.syspath_prepend(str(_site(tmp_path, f"random_search = {__name__}:ALGORITHM")))
    assert get_algorithm("random_search") is ALGORITHM
    assert algorithm_names() == ("ppo", "apg", "shac", "ahac", "random_search")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("random_search = no_such_module:ALGORITHM", r"does not load: ModuleNotFoundError"),
        (
            "search = tests.cli.random_search:ALGORITHM",
            r"must name an AlgorithmSpec whose name is 'search'",
        ),
        ("random_search = tests.cli.random_search:RandomSearch", r"must name an AlgorithmSpec"),
    ],
)
@pytest.mark.usefixtures("registry")
def test_a_broken_entry_point_names_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str, message: str
) -> None:
    """An entry point that does not load or names something else is one ConfigError."""
    monkeypatch.syspath_prepend(str(_site(tmp_path, entry)))
    with pytest.raises(
        ConfigError, match=rf"entry point .* \(group typedrl\.algorithms\) {message}"
    ):
        get_algorithm("random_search")
