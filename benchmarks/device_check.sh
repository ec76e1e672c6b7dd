#!/usr/bin/env bash
# The prepared device check: a preflight (what the steps import, JAX on the
# GPU), every experiment's gpu preset reproduction for one seed, then the GPU
# throughput benchmarks, each step with its own time limit, in one command
# of at most 9 minutes on one H100 with no network.
#
# Prepare here (PyPI reachable), once per session, from the checkout's root:
#
#     bash benchmarks/device_wheels.sh      # the locked wheels into .whl/ (~25 MiB,
#                                           # git-ignored; travels with carry)
#
# Then the exact call of the session's `run` tool (the GPU machine gets a copy
# of the working tree; $OUT comes back, at most 8 files: this writes 5;
# summary.json and summary.md are rewritten after every step, so a call cut
# short still brings those back):
#
#     run(command="bash benchmarks/device_check.sh --out $OUT --work /tmp/w",
#         carry=[".whl"], timeout_s=600)
#
# (kind left out: an H100, else an H200; the files land under the reply's
# files_at: `python benchmarks/device_ledger.py FILES_AT` files them into
# benchmarks/results/gpu/ and its ledger; commit them). Five seeds
# of one experiment with the controls, in a later call (filed into
# benchmarks/results/gpu_seeds5_NAME/, where the next such call reads it):
#
#     run(command="bash benchmarks/device_check.sh --seeds5 dpt_bandit --out $OUT",
#         carry=[".whl"], timeout_s=600)
#
# Every step gets the cublas XLA flags (_device_check.CUBLAS_FLAGS: cuBLAS
# matmuls, no autotuning; XLA's defaults compile for ~90 s a program);
# --xla-flags auto probes variants first (100-160 s), none gives XLA's
# defaults. Before any step, a preflight imports what the steps import and
# checks that JAX runs on the GPU: if not, the check stops in seconds with
# the reason in summary.md (exit status 3), rather than running on the CPU.
#
# A machine stays warm ~30 s after a call. To resume a reproduction that a
# step's limit stopped (its checkpoint is complete), give both calls the same
# --work folder on the machine and call again at once, e.g.
#
#     run(command="bash benchmarks/device_check.sh --out $OUT --work /tmp/w \
#                  --only reproduce:dpt_bandit --budget 300", ...)
#
# The whole check keeps to --budget seconds (default 540: 9 minutes) whatever
# its steps do: each step is killed at its own limit, cut to what is left, and
# the reproductions stop --bench-reserve seconds (150) early so the benchmarks
# run; a reproduction whose expected time (its last time in the ledger, else
# 180 s) does not fit what is left is skipped, not started. Steps already ok
# in the committed benchmarks/results/gpu/summary.json (the ledger) are
# skipped (--redo runs them again), so successive sessions work down the
# list; --only STEP,... picks steps (names in summary.json). Without --out
# the files go to $TMPDIR/agentrl-device-check/, never into the ledger.
# Details: benchmarks/_device_check.py.
#
# On this CPU, the same script at the smoke presets (no wheels, JAX on CPU):
#
#     bash benchmarks/device_check.sh --smoke --out /tmp/check
#
# (every step: most of an hour on 2 cores). tests/test_device_check.py runs
# it in `make test` once, on the preflight and one quick benchmark (--only
# bench:xla_flags: under a minute on 2 cores), and in `make test-long` three
# times more: train_throughput; the XLA-flags probe (--xla-flags auto), then
# sweep_members; two reproductions (dpt_bandit, ad_darkroom) and
# train_throughput.
set -uo pipefail
# the budget counts from here, the wheels' install included
export AGENTRL_CHECK_STARTED=${AGENTRL_CHECK_STARTED:-$(date +%s)}
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=${AGENTRL_WHEELS:-.whl}
smoke=0
for arg in "$@"; do
  [ "$arg" = "--smoke" ] && smoke=1
done
# the wheels' outcome goes into summary.json ("wheels"); a failed install
# does not stop here: the preflight then fails on the missing imports and
# writes the summary into --out, so the reply says why
export AGENTRL_CHECK_WHEELS="none (--smoke: the installed packages)"
if [ "$smoke" = 0 ]; then
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    site=/tmp/agentrl-device-site
    count=$(ls "$WHEELS"/*.whl | wc -l)
    echo "[device check] installing $count wheels from $WHEELS"
    if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target "$site" "$WHEELS"/*.whl; then
      AGENTRL_CHECK_WHEELS="$count installed from $WHEELS"
    else
      echo "[device check] error: the wheels in $WHEELS did not install" >&2
      AGENTRL_CHECK_WHEELS="error: the $count wheels in $WHEELS did not install"
    fi
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "[device check] no wheels in $WHEELS: the preflight checks the installed packages"
    AGENTRL_CHECK_WHEELS="none in $WHEELS: the installed packages"
  fi
fi
export PYTHONUNBUFFERED=1
exec "$PY" benchmarks/_device_check.py "$@"
