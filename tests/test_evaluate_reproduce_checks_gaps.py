"""The validation note's threshold: as many tasks as resolve a choice need none."""

from agentrl.configtools import override
from agentrl.evaluate.metrics import MIN_RESOLVING_TASKS
from agentrl.evaluate.reproduce_checks import check_validation
from agentrl.train.experiments import load_experiment


def test_exactly_the_resolving_count_of_validation_tasks_needs_no_note():
    darkroom = load_experiment("ad_darkroom", "smoke")  # its split holds 8
    enough = override(darkroom, {"eval.validation_tasks": MIN_RESOLVING_TASKS})
    assert check_validation(enough) is None
    fewer = override(darkroom, {"eval.validation_tasks": MIN_RESOLVING_TASKS - 1})
    assert f"chosen on {MIN_RESOLVING_TASKS - 1} validation tasks" in (
        check_validation(fewer)
    )
