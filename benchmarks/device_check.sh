#!/usr/bin/env bash
# The prepared device check: every experiment's gpu preset reproduction for
# one seed, then the GPU throughput benchmarks, each step with its own time
# limit, in one command of at most 9 minutes on one H100 with no network.
#
# Prepare here (PyPI reachable), once per session, from the checkout's root:
#
#     bash benchmarks/device_wheels.sh      # the locked wheels into .whl/ (~25 MiB,
#                                           # git-ignored; travels with carry)
#
# Then the exact call of the session's `run` tool (the GPU machine gets a copy
# of the working tree; $OUT comes back, at most 8 files: this writes 5):
#
#     run(command="bash benchmarks/device_check.sh --out $OUT",
#         carry=[".whl"], timeout_s=600)
#
# (kind left out: an H100, else an H200; the files land under the reply's
# files_at: `python benchmarks/device_ledger.py FILES_AT` files them into
# benchmarks/results/gpu/ and its ledger; commit them). Five seeds
# of one experiment with the controls, in a later call:
#
#     run(command="bash benchmarks/device_check.sh --seeds5 dpt_bandit --out $OUT",
#         carry=[".whl"], timeout_s=600)
#
# A machine stays warm ~30 s after a call. To resume a reproduction that a
# step's limit stopped (its checkpoint is complete), give both calls the same
# --work folder on the machine and call again at once, e.g.
#
#     run(command="bash benchmarks/device_check.sh --out $OUT --work /tmp/w", ...)
#     run(command="bash benchmarks/device_check.sh --out $OUT --work /tmp/w \
#                  --only reproduce:dpt_bandit --budget 300", ...)
#
# (add --xla-flags='<the flags the first call's summary.md names>' to the
# second call to skip its probe).
#
# The whole check keeps to --budget seconds (default 540: 9 minutes) whatever
# its steps do: each step is killed at its own limit, cut to what is left, and
# the reproductions stop --bench-reserve seconds (150) early so the benchmarks
# run. Steps already ok in the committed benchmarks/results/gpu/summary.json
# (the ledger) are skipped (--redo runs them again), so successive sessions work down the
# list; --only STEP,... picks steps (names in summary.json). Details:
# benchmarks/_device_check.py.
#
# On this CPU, the same script at the smoke presets (no wheels, JAX on CPU):
#
#     bash benchmarks/device_check.sh --smoke --out /tmp/check
#
# tests/test_device_check.py runs it that way in `make test`.
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
if [ "$smoke" = 0 ]; then
  if compgen -G "$WHEELS/*.whl" >/dev/null; then
    site=/tmp/agentrl-device-site
    echo "[device check] installing $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target "$site" "$WHEELS"/*.whl || {
      echo "[device check] error: the wheels in $WHEELS did not install" >&2
      exit 3
    }
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "[device check] no wheels in $WHEELS: using the installed packages"
  fi
fi
export PYTHONUNBUFFERED=1
exec "$PY" benchmarks/_device_check.py "$@"
