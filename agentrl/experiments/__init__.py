"""Experiments: one module per study, each a base config and its presets.

Every module defines ``PRESETS: dict[str, Callable[[], ExperimentConfig]]``
with at least ``smoke``, ``cpu`` and ``full``; its docstring gives the
command, the expected result and the time of each preset. They ship inside
the package, so ``agentrl train ad_darkroom`` works from any directory of an
installed agentrl; :func:`agentrl.train.experiments.load_experiment` finds
them by name (a ``./experiments/<name>.py`` of the user's own, or a path to
any such file, is found first).
"""
