"""The Algorithm protocol: names stay inside agentrl/algos, configs round-trip,
and derived fields re-derive."""

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from agentrl import algos, configtools
from agentrl.train.experiments import load_experiment

PACKAGE = Path(__file__).resolve().parents[1] / "agentrl"


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(
            node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        )
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_module_outside_algos_names_an_algorithm():
    """Training, evaluation and sweeps ask the algorithm object, never its name."""
    registered = set(algos.names()) | {cls.name for cls in _algorithm_classes()}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "algos") in path.parents:
            continue
        for line, value in _string_constants(path):
            if value in registered:
                offenders.append(f"{path.relative_to(PACKAGE)}:{line}: {value!r}")
    assert not offenders, "\n".join(offenders)


def test_the_name_check_sees_a_violation(tmp_path):
    """The scan above finds a name used as a string (it could fail)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""Doc: ad is fine here."""\n\nif config.algo == "dpt":\n    pass\n'
    )
    assert _string_constants(bad) == [(3, "dpt")]


def _algorithm_classes():
    seen, todo = set(), [algos.Algorithm]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen and sub.name:
                seen.add(sub)
            todo.append(sub)
    return seen


@pytest.mark.parametrize("name", algos.names())
def test_every_registered_algorithm_round_trips_through_json(name):
    algo = algos.get(name)
    again = algos.Algorithm.from_config_dict(
        json.loads(json.dumps(algo.to_config_dict()))
    )
    assert again == algo and type(again) is type(algo)


def test_traced_fields_are_declared_on_the_field():
    t2mir = load_experiment("t2mir_ad_darkroom", "smoke")
    assert set(configtools.traced_values(t2mir)) == {
        "train.lr",
        "train.weight_decay",
        "algo.balance_weight",
        "algo.contrastive_weight",
        "algo.ema_tau",
    }
    ad = load_experiment("ad_darkroom", "smoke")
    assert set(configtools.traced_values(ad)) == {"train.lr", "train.weight_decay"}


def test_t2mir_wraps_its_base_instead_of_copying_it():
    config = load_experiment("t2mir_dpt_darkroom", "smoke")
    assert isinstance(config.algo, algos.T2MIR)
    assert isinstance(config.algo.base, algos.DPT)
    assert config.algo.label == "t2mir_dpt"
    # the base's fields are the wrapped algorithm's, reachable by unique name
    changed = configtools.override(config, {"context_size": 7})
    assert changed.algo.base.context_size == 7


def test_algo_by_name_on_the_command_line():
    config = load_experiment("ad_darkroom", "smoke", {"algo": "ad_eps"})
    assert isinstance(config.algo, algos.ADEps)
    with pytest.raises(ValueError, match="algo must be one of"):
        load_experiment("ad_darkroom", "smoke", {"algo": "ppo"})


def test_swapping_the_algorithm_by_name_keeps_the_shared_fields():
    # ad_darkroom's smoke preset sets AD's context_episodes to 2 (default 4):
    # the swap keeps it wherever the new algorithm has the field
    config = load_experiment("ad_darkroom", "smoke", {"model.obs_encoding": "table"})
    assert config.algo.context_episodes == 2  # (DT needs the table encoding)
    for name in ("ad_eps", "dt", "ad"):
        swapped = configtools.override(config, {"algo": name})
        assert swapped.algo.name == name and swapped.algo.context_episodes == 2
    # into and out of T2MIR's wrapped AD (as algorithms: a config cannot
    # hold both, T2MIR needs MoE layers and AD refuses them)
    t2mir = configtools.carry_shared_fields(config.algo, algos.get("t2mir_ad"))
    assert t2mir.base.context_episodes == 2
    t2mir = dataclasses.replace(t2mir, balance_weight=0.5)
    back = configtools.carry_shared_fields(t2mir, algos.AD())
    assert back == algos.AD(context_episodes=2)
    assert configtools.carry_shared_fields(t2mir, algos.get("t2mir_dpt")) == (
        algos.T2MIR(base=algos.DPT(), balance_weight=0.5)
    )
    # a field given with the swap wins; DPT has no such field
    given = configtools.override(config, {"algo": "dt", "algo.context_episodes": 3})
    assert given.algo.context_episodes == 3
    assert configtools.carry_shared_fields(config.algo, algos.DPT()) == algos.DPT()
    # a field left at the old default takes the new one's default:
    # RL²'s one-episode trials do not shorten transformer PPO's four
    tppo = algos.get("transformer_ppo")
    assert configtools.carry_shared_fields(algos.RL2(), tppo) == tppo
    two = configtools.carry_shared_fields(algos.RL2(trial_episodes=2), tppo)
    assert two.trial_episodes == 2
    # an algorithm given as an object is taken as it is
    as_given = configtools.override(config, {"algo": algos.DT()})
    assert as_given.algo.context_episodes == algos.DT().context_episodes


def test_a_swap_and_the_fields_it_needs_are_validated_together():
    """``--algo dt --model.obs_encoding table`` on a grid-encoded preset: DT
    alone is refused there, so the swap must not be validated before the
    encoding changes (it was: every such command failed), in either order;
    the preset's config is left as it was."""
    config = load_experiment("ad_darkroom", "smoke")
    assert config.model.obs_encoding == "grid"
    with pytest.raises(configtools.ConfigError, match="obs_encoding must be 'table'"):
        configtools.override(config, {"algo": "dt"})
    for changes in (
        {"algo": "dt", "model.obs_encoding": "table"},
        {"model.obs_encoding": "table", "algo": "dt"},
    ):
        swapped = configtools.override(config, changes)
        assert swapped.algo.name == "dt" and swapped.model.obs_encoding == "table"
        assert swapped.algo.context_episodes == 2  # carried from the preset
    assert config.algo.name == "ad" and config.model.obs_encoding == "grid"


def test_derived_fields_follow_the_fields_they_derive_from():
    config = load_experiment("ad_darkroom", "cpu")
    assert config.train.warmup == 200  # a tenth of 2,000 steps
    longer = load_experiment("ad_darkroom", "cpu", {"train.steps": "6000"})
    assert longer.train.warmup == 600  # re-derived, not the preset's 200
    pinned = load_experiment("ad_darkroom", "cpu", {"train.warmup_steps": "50"})
    assert pinned.train.warmup == 50

    from agentrl.envs import make
    from agentrl.train.config import complete_config

    env = make("darkroom")
    wider = load_experiment("ad_darkroom", "smoke", {"context_episodes": "3"})
    assert complete_config(wider, env).model.max_steps == 3 * env.horizon


def test_overrides_apply_together_whatever_their_order():
    # num_layers=4 with moe_layers=(3,) is only valid when both are applied
    config = load_experiment("t2mir_ad_darkroom", "smoke")
    for order in (
        {"model.moe_layers": "(3,)", "model.num_layers": "4"},
        {"model.num_layers": "4", "model.moe_layers": "(3,)"},
    ):
        changed = configtools.override(config, order)
        assert changed.model.moe_layers == (3,) and changed.model.num_layers == 4


def test_a_new_algorithm_is_one_class():
    @dataclasses.dataclass(frozen=True)
    class Weighted(algos.AD):
        name = "test_weighted_ad"
        late_weight: float = configtools.traced(2.0)

    algos.register_algorithm(Weighted)
    try:
        config = load_experiment("ad_darkroom", "smoke", {"algo": "test_weighted_ad"})
        assert isinstance(config.algo, Weighted)
        assert configtools.traced_values(config)["algo.late_weight"] == 2.0
        assert float(configtools.default_hparams(config)["algo"]["late_weight"]) == 2.0
        with pytest.raises(ValueError, match="already registered"):
            algos.register_algorithm("test_weighted_ad", algos.AD)
    finally:
        from agentrl.algos import base

        base.ALGORITHMS.unregister("test_weighted_ad")
