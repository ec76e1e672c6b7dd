"""The command line: dispatch, listing, and early clear errors."""

from agentrl.cli import main


def test_help_and_unknown_command(capsys):
    assert main([]) == 2
    assert "train" in capsys.readouterr().out
    try:
        main(["trian"])
    except SystemExit as e:
        assert e.code == 2
    assert "unknown command 'trian'" in capsys.readouterr().err


def test_envs_table(capsys):
    assert main(["envs", "darkroom", "--tasks", "8"]) == 0
    out = capsys.readouterr().out
    assert "| darkroom | 20 |" in out


def test_train_bad_field_fails_before_compiling(capsys):
    assert main(["train", "ad_darkroom", "--train.lrr", "1"]) == 2
    err = capsys.readouterr().err
    assert "unknown config field 'train.lrr'" in err and "train.lr" in err


def test_unrecognized_flag_for_a_command_without_overrides(capsys):
    try:
        main(["envs", "--bogus", "1"])
    except SystemExit as e:
        assert e.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
