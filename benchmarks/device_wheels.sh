#!/usr/bin/env bash
# Download the wheels a GPU machine of this workplace lacks, at exactly the
# versions constraints.txt locks, for Linux x86_64 / CPython 3.12, into a
# git-ignored folder that benchmarks/device_check.sh installs from (no network
# there). Run it here, where PyPI is reachable, before the device check:
#
#     bash benchmarks/device_wheels.sh            # into .whl/ (default)
#     bash benchmarks/device_wheels.sh DIR        # into DIR
#     bash benchmarks/device_wheels.sh --list     # name==version of each, no download
#
# The GPU image already holds jax (CUDA), flax, optax, chex, orbax-checkpoint,
# tensorstore, numpy, matplotlib, seaborn, absl-py, etils, protobuf, pyarrow,
# psutil, requests, tqdm, wrapt, cloudpickle, attrs, six, rich, imageio,
# scipy, pillow, pyyaml and typing-extensions; PACKAGES below is what it lacks
# (agentrl's own needs and their small dependencies, xminigrid for the XLand
# experiments, the extra agentrl[mujoco] for the MuJoCo families; protobuf and
# typing-extensions at the locked versions, in case the image's are older). Each is
# fetched with --no-deps; a package PyPI ships only as source (promise) is
# built into a wheel here (pure Python). The folder and the working tree
# must stay under the run tool's 64 MiB together: the total is checked at the
# end (benchmarks/travel_size.py; tests/test_travel_size.py holds the tree to
# its share in make test).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.whl}
PY=${PYTHON:-python3}
PACKAGES=(
  tensorflow-datasets tensorflow-metadata grain array-record gymnax tyro
  tensorboardX docstring-parser typeguard dm-tree immutabledict promise
  simple-parsing termcolor toml googleapis-common-protos nest-asyncio2
  gymnasium farama-notifications portpicker xminigrid
  # agentrl[mujoco], and what building and stepping a family imports besides
  # the image's (glfw: mujoco's default GL backend; jaxopt: brax; trimesh: mjx)
  brax mujoco mujoco-mjx glfw jaxopt trimesh
  # in the image, but maybe older than these need (googleapis-common-protos:
  # protobuf >= 6.33.5; typeguard: typing-extensions >= 4.14)
  protobuf typing-extensions
)

# The locked version of $1 (names compared as pip does: case, '-', '_', '.').
locked() {
  local want
  want=$(echo "$1" | tr 'A-Z_.' 'a-z--')
  awk -F'==' -v want="$want" '
    /^[^#].*==/ { name = tolower($1); gsub(/[_.]/, "-", name)
                  if (name == want) { print $2; exit } }' constraints.txt
}

if [ "$DEST" = "--list" ]; then
  for name in "${PACKAGES[@]}"; do
    version=$(locked "$name")
    [ -n "$version" ] || { echo "error: $name is not in constraints.txt" >&2; exit 2; }
    echo "$name==$version"
  done
  exit 0
fi
mkdir -p "$DEST"
for name in "${PACKAGES[@]}"; do
  version=$(locked "$name")
  if [ -z "$version" ]; then
    echo "error: $name is not in constraints.txt" >&2
    exit 2
  fi
  if ! "$PY" -m pip download --quiet --no-deps --only-binary=:all: \
      --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux1_x86_64 --platform any \
      -d "$DEST" "$name==$version" 2>/dev/null; then
    echo "$name==$version: no wheel on the index; building one from source"
    "$PY" -m pip wheel --quiet --no-deps -w "$DEST" "$name==$version"
  fi
done
# Only the locked versions: a stale wheel of another version would make two.
for whl in "$DEST"/*.whl; do
  base=$(basename "$whl")
  dist=${base%%-*}
  ver=${base#*-}; ver=${ver%%-*}
  if [ "$(locked "$dist")" != "$ver" ]; then
    echo "removing $base (not the locked version $(locked "$dist"))"
    rm -f "$whl"
  fi
done
# Files no run here imports, out of the wheels (and their RECORD), so the
# folder fits beside the working tree: MuJoCo's experimental viewer (Studio,
# Dear ImGui, ImPlot; 15 MiB) and MJX's test models (6 MiB).
"$PY" - "$DEST" <<'EOF'
import os, sys, zipfile
from pathlib import Path
DROP = ("mujoco/experimental/", "mujoco/mjx/test_data/")
for whl in Path(sys.argv[1]).glob("mujoco*.whl"):
    with zipfile.ZipFile(whl) as z:
        keep = [i for i in z.infolist() if not i.filename.startswith(DROP)]
        if len(keep) == len(z.infolist()):
            continue
        with zipfile.ZipFile(f"{whl}.tmp", "w") as out:
            for info in keep:
                data = z.read(info)
                if info.filename.endswith(".dist-info/RECORD"):
                    lines = data.decode().splitlines(keepends=True)
                    data = "".join(l for l in lines if not l.startswith(DROP))
                out.writestr(info, data)
    os.replace(f"{whl}.tmp", whl)
    print(f"slimmed {whl.name}: {whl.stat().st_size / 2**20:.1f} MiB")
EOF
count=$(ls "$DEST"/*.whl | wc -l)
mib=$(du -sm "$DEST" | cut -f1)
echo "$count wheels, $mib MiB in $DEST"
if [ "$count" -ne "${#PACKAGES[@]}" ]; then
  echo "error: expected ${#PACKAGES[@]} wheels" >&2
  exit 1
fi
# the working tree and these wheels, against what one device call sends
"$PY" benchmarks/travel_size.py --with "$DEST"
