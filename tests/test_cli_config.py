"""The generated command line: typed config flags, --help from the docs, errors.

Nothing compiles: commands stop at their checks (``fit`` is replaced by a
guard that fails the test if reached, where a test must not train).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import pytest

from agentrl import algos, cliargs, configcli, configtools
from agentrl.cli import is_input_error, main
from agentrl.configtools import ConfigError
from agentrl.train.experiments import known_experiments, load_experiment


@pytest.fixture
def no_fit(monkeypatch):
    """Fail the test if a command gets as far as training."""
    import agentrl.train.loop

    def refuse(*args, **kwargs):
        raise AssertionError("fit was reached")

    monkeypatch.setattr(agentrl.train.loop, "fit", refuse)


def _help(argv, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_train_help_lists_every_field_with_type_default_and_doc(capsys, monkeypatch):
    out = _help(["train", "ad_darkroom", "--help"], capsys, monkeypatch)
    config = load_experiment("ad_darkroom", "smoke")
    for path in configtools.field_paths(config):
        assert f"--{path} " in out, path
    # type, the preset's value as default, the field's documentation
    flat = " ".join(out.split())  # rich wraps long help lines
    assert "--train.lr FLOAT peak learning rate (AdamW). [traced" in flat
    assert "(default: 0.001)" in flat
    assert "--model.expert_ff {None}|INT hidden width of each expert" in flat
    assert "--model.moe_layers [INT [INT ...]]" in flat
    assert "--data.source_args KEY=VALUE ..." in flat
    assert "Settings of source 'q_learning' (defaults): " in flat
    assert "--eval.acting STR the acting rule" in flat
    # the command's own options come first
    assert "--run-dir" in out and "--stop-at-step" in out and "--no-resume" in out


def _option_help(flat: str, flag: str) -> str:
    """The help of ``flag`` in a flattened help text (up to the next option)."""
    start = flat.index(f"{flag} ")
    following = flat.find(" --", start + len(flag))
    return flat[start : following if following > 0 else None]


def test_train_help_shows_the_values_the_run_resolves(capsys, monkeypatch):
    # ad_darkroom is 9x9 Dark Room: 81 cells, 5 actions, a window of
    # context_episodes x horizon steps; the dataclass defaults (25 ...) are
    # never what the run uses
    out = _help(["train", "ad_darkroom", "--help"], capsys, monkeypatch)
    flat = " ".join(out.split())
    obs = _option_help(flat, "--model.obs_size")
    assert "(default: 81)" in obs and "[derived for this experiment" in obs
    assert "(default: 40)" in _option_help(flat, "--model.max_steps")  # 2 x 20
    lr = _option_help(flat, "--train.lr")
    assert "derived" not in lr  # a field the preset sets is not marked
    # the overrides on the line are shown resolved too
    out = _help(
        ["train", "ad_darkroom", "--data.env_args", "size=5", "--help"],
        capsys,
        monkeypatch,
    )
    assert "(default: 25)" in _option_help(" ".join(out.split()), "--model.obs_size")


def test_command_help_says_each_default_once_and_names_positionals_as_errors_do(
    capsys, monkeypatch
):
    for argv in (["eval"], ["train"], ["sweep"]):
        out = _help([*argv, "--help"], capsys, monkeypatch)
        twice = [
            o for o in " ".join(out.split()).split(" --") if o.count("(default") > 1
        ]
        assert not twice, twice
    out = _help(["eval", "--help"], capsys, monkeypatch)
    flat = " ".join(out.split())
    assert "(default: the run's eval.num_episodes)" in flat
    assert "(default: RUN_DIR/eval)" in _option_help(flat, "--out")
    # the positional is RUN_DIR in the usage and its entry, as the error says
    assert out.splitlines()[0].rstrip().endswith("RUN_DIR")
    assert "RUN_DIR the training run directory" in flat
    assert main(["eval"]) == 2
    assert "required: RUN_DIR" in capsys.readouterr().err


def test_reproduce_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    out = capsys.readouterr().out
    entries, current = [], None
    for line in out.splitlines():
        if line.startswith("  -"):
            current = [line.strip()]
            entries.append(current)
        elif current is not None and line.startswith("      "):
            current.append(line.strip())
        else:
            current = None
    assert len(entries) >= 10
    bare = [e[0] for e in entries if len(e) == 1 and "  " not in e[0]]
    assert not bare, f"options without help: {bare}"


def test_every_field_of_every_experiment_has_help_text():
    undocumented = set()

    def walk(node):
        docs = configcli.field_docs(type(node))
        for f in dataclasses.fields(node):
            if not docs.get(f.name):
                undocumented.add(f"{type(node).__name__}.{f.name}")
            value = getattr(node, f.name)
            if dataclasses.is_dataclass(value):
                walk(value)

    for name in known_experiments():
        walk(load_experiment(name, "smoke"))
    assert not undocumented, sorted(undocumented)


def test_field_docs_read_attributes_sections_and_comments():
    @dataclasses.dataclass
    class Example:
        """An example.

        Attributes:
          a, b: shared text
            continued here.
        """

        a: int = 1
        b: int = 2
        #: documented above
        c: int = 3
        d: int = 4  # documented after

    assert configcli.field_docs(Example) == {
        "a": "shared text continued here.",
        "b": "shared text continued here.",
        "c": "documented above",
        "d": "documented after",
    }


def test_typed_flags_for_tuples_pairs_bools_and_none_defaults():
    config = load_experiment("t2mir_ad_darkroom", "smoke")
    new = configcli.parse(
        config,
        [
            "--model.moe_layers",
            "0",
            "1",
            "--data.source_args",
            "explore_fraction=0.5",
            "learning_rate=0.2",
            "--model.token_noise",
            "false",
            "--model.expert_ff",
            "24",
            "--lr=2e-3",  # a unique leaf name still works
            "--train.log-every",
            "7",  # and - for _
        ],
    )
    assert new.model.moe_layers == (0, 1)
    assert new.data.source_args == (("explore_fraction", 0.5), ("learning_rate", 0.2))
    assert new.model.token_noise is False and new.model.expert_ff == 24
    assert new.train.lr == 2e-3 and new.train.log_every == 7
    for none in ("None", "none", "null"):
        again = configcli.parse(new, ["--model.expert_ff", none])
        assert again.model.expert_ff is None


def test_algo_swap_comes_before_the_swapped_algorithms_fields():
    config = load_experiment("ad_darkroom", "smoke")
    new = configcli.parse(config, ["--algo.episode_stride", "2", "--algo", "ad_eps"])
    assert type(new.algo) is type(algos.get("ad_eps"))
    assert new.algo.episode_stride == 2


def test_algo_swap_is_validated_with_the_fields_it_needs():
    """DT needs the table encoding, which ad_darkroom's grid is not: the
    command line that changes both is one valid config (it was refused);
    the swap alone is refused naming the field."""
    config = load_experiment("ad_darkroom", "smoke")
    for argv in (
        ["--algo", "dt", "--model.obs_encoding", "table"],
        [
            "--model.obs_encoding",
            "table",
            "--algo",
            "dt",
            "--algo.context_episodes",
            "3",
        ],
    ):
        new = configcli.parse(config, argv)
        assert new.algo.name == "dt" and new.model.obs_encoding == "table"
    assert new.algo.context_episodes == 3
    with pytest.raises(configtools.ConfigError, match="obs_encoding must be 'table'"):
        configcli.parse(config, ["--algo", "dt"])


def test_a_node_only_the_swapped_algorithm_has_is_swapped_by_name_too():
    """``--algo t2mir_ad --algo.base dt`` on an AD preset: ``algo.base`` is
    a node of T2MIR, not of AD, and was read as a stray value (refused)."""
    config = load_experiment("ad_darkroom", "smoke")
    algo, base = ["--algo", "t2mir_ad"], ["--algo.base", "dt"]
    field = ["--algo.base.context_episodes", "3"]
    model = ["--model.obs_encoding", "table", "--model.moe_layers", "0"]
    for order in (algo + base + field + model, model + field + base + algo):
        new = configcli.parse(config, order)
        assert type(new.algo) is type(algos.get("t2mir_ad"))
        assert new.algo.base.name == "dt"
        assert new.algo.base.context_episodes == 3
    with pytest.raises(configtools.ConfigError, match="field algo is given twice"):
        configcli.parse(config, ["--algo", "dt", "--algo", "ad_eps"])
    unknown = "unknown config field 'algo.base'"
    with pytest.raises(configtools.ConfigError, match=unknown):
        configcli.parse(config, ["--algo.base", "dt"])


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--model.expert_ff", "abc"], "model.expert_ff must be of type int | None"),
        (["--model.moe_layers", "0", "x"], "model.moe_layers must be of type"),
        (["--eval.acting", "maybe"], "eval.acting must be one of"),
        (["--data.source_args", "noequals"], "data.source_args must be KEY=VALUE"),
        (["--train.lr", "1", "--lr", "2"], "field train.lr is given twice"),
    ],
)
def test_bad_typed_values_exit_2_naming_the_field(argv, fragment, capsys, no_fit):
    code = main(["train", "ad_darkroom", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("agentrl train: error:"), err
    assert fragment in err and "Traceback" not in err, err


def test_override_from_python_raises_config_error_naming_the_field():
    config = load_experiment("ad_darkroom", "smoke")
    with pytest.raises(ConfigError, match="model.num_heads|num_heads"):
        configtools.override(config, {"model.num_heads": 3})
    with pytest.raises(ValueError, match="train.lr"):  # still a ValueError
        configtools.override(config, {"train.lr": -1})


def test_a_jax_value_error_keeps_its_traceback(monkeypatch, capsys):
    import agentrl.train.loop

    def broken(*args, **kwargs):
        return jnp.ones(3).item()  # ValueError raised inside JAX

    monkeypatch.setattr(agentrl.train.loop, "fit", broken)
    with pytest.raises(ValueError, match="size 1") as info:
        main(["train", "ad_darkroom", "--run-dir", "unused"])
    assert not is_input_error(info.value)
    assert "error:" not in capsys.readouterr().err


def test_a_value_error_raised_by_agentrl_is_an_input_error():
    with pytest.raises(ValueError) as info:
        from agentrl.envs import make

        make("no_such_env")
    assert is_input_error(info.value)
    assert is_input_error(ConfigError("x")) and not is_input_error(RuntimeError("x"))


def test_debug_shows_the_traceback_of_a_config_error(no_fit):
    with pytest.raises(ConfigError, match="train.lr"):
        main(["train", "ad_darkroom", "--train.lr", "-1", "--debug"])
    with pytest.raises(ConfigError, match="train.lr"):
        main(["--debug", "train", "ad_darkroom", "--train.lr", "-1"])


def test_a_command_option_is_one_dataclass_field():
    """What docs/cli.md promises: adding an option is adding a field."""

    @dataclasses.dataclass
    class Args:
        """A command."""

        count: cliargs.PositiveInt = 3
        """how many"""
        name: str | None = None
        """a name"""
        loud: bool = False
        """shout"""

    assert cliargs.parse(Args, [], "prog") == Args()
    parsed = cliargs.parse(Args, ["--count", "5", "--loud"], "prog")
    assert parsed == Args(5, None, True)
    with pytest.raises(ConfigError, match=r"argument --count: must be an integer >= 1"):
        cliargs.parse(Args, ["--count", "0"], "prog")
    with pytest.raises(ConfigError, match="unrecognized arguments: --bogus"):
        cliargs.parse(Args, ["--bogus"], "prog")
    text = cliargs.help_text(Args, "prog")
    assert "--count INT>=1" in text and "how many" in text and "(default: 3)" in text
