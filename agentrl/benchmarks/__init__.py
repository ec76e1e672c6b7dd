"""Speed and result benchmarks, shipped with the package.

One module per benchmark, each with ``main(argv=None)``; run one with
``agentrl bench NAME [args...]`` (or ``python -m agentrl.benchmarks.NAME``)
and list them with ``agentrl bench``. Shared plumbing (machine facts,
timing, targets, result files) is :mod:`agentrl.benchmarks.common`.

A benchmark prints ratios against a reference run in the same process and
writes ``<name>.json`` and ``<name>.md`` into ``benchmarks/results`` under
the current directory, so that run from a checkout its results land beside
the committed ones; set ``AGENTRL_BENCH_RESULTS=DIR`` (or pass
``agentrl bench --out DIR NAME``) to write elsewhere.
"""

#: Environment variable that moves the results folder.
RESULTS_ENV = "AGENTRL_BENCH_RESULTS"
