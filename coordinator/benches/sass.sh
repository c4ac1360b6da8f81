#!/usr/bin/env bash
# The kernel's cost read without a GPU: NVRTC makes each shape's PTX (the `ptx` example of nqueens-gpu),
# ptxas compiles it for one architecture and reports registers and spills, nvdisasm gives the SASS, and
# sass_paths.py counts the instructions each way through the node loop issues. On a GPU whose warps are
# kept busy these counts are what a node costs, so a change to search.cl can be weighed between GPU
# sessions. NVRTC, ptxas and nvdisasm come from PyPI into a virtual environment (nothing else needed).
# Usage: coordinator/benches/sass.sh [ARCH=90] [SHAPE...]
set -euo pipefail
cd "$(dirname "$0")/../.."
ARCH=${1:-90}
shift || true
SHAPES=${*:-local/256/8 compact/256/8 shared/64/8 flat/128/4 coop/128/8 stream/128/4}
NVRTC=12.9.86 NVCC=12.9.86 NVDISASM=13.5.37
venv="${XDG_CACHE_HOME:-$HOME/.cache}/nqueens-ci/venv-sass-$NVCC"
if [ ! -x "$venv/bin/python" ] || ! ls "$venv"/lib/python3*/site-packages/nvidia/cu13/bin/nvdisasm >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "nvidia-cuda-nvrtc-cu12==$NVRTC" "nvidia-cuda-nvcc-cu12==$NVCC" "nvidia-cuda-nvdisasm==$NVDISASM"
fi
site=$(ls -d "$venv"/lib/python3*/site-packages)
export LD_LIBRARY_PATH="$site/nvidia/cuda_nvrtc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ptxas="$site/nvidia/cuda_nvcc/bin/ptxas"
nvdisasm="$site/nvidia/cu13/bin/nvdisasm"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# shellcheck disable=SC2086
cargo run -q --release --locked -p nqueens-gpu --example ptx -- "$out" "$ARCH" $SHAPES >/dev/null
echo "sm_$ARCH, $("$ptxas" --version | tail -1), nvdisasm $NVDISASM, $(git rev-parse --short HEAD)$(git diff --quiet -- worker/gpu/src || echo '+changes')"
echo "| shape | registers | spilled bytes | instructions per pass, each way through the node loop |"
echo "|---|---|---|---|"
for s in $SHAPES; do
  f="$out/${s//\//-}"
  info=$("$ptxas" -arch="sm_$ARCH" -v -O3 "$f.ptx" -o "$f.cubin" 2>&1)
  regs=$(echo "$info" | grep -oE 'Used [0-9]+ registers' | grep -oE '[0-9]+')
  spill=$(echo "$info" | grep -oE '[0-9]+ bytes spill stores' | grep -oE '^[0-9]+')
  "$nvdisasm" -c "$f.cubin" >"$f.sass" 2>/dev/null
  ways=$(python3 coordinator/benches/sass_paths.py "$f.sass" | grep -v 'leaves the loop' |
    sed -e 's/^\([0-9]*\) *\(.*\)$/\1 (\2)/' -e 's/ ()//' | paste -sd, - | sed 's/,/, /g')
  echo "| $s | $regs | $spill | $ways |"
done
