# Sourced by the GPU scripts: points cudarc (which opens libnvrtc.so or .so.12) at whatever NVRTC this
# machine has, linking it under OUTDIR/lib. Needs OUTDIR and a `say` function.
if ! ldconfig -p | grep -q 'libnvrtc.so '; then
  NV=$(ls /usr/local/cuda*/lib64/libnvrtc.so* /usr/local/cuda*/targets/*/lib/libnvrtc.so* \
        /usr/lib/x86_64-linux-gnu/libnvrtc.so* \
        $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null | tr ' ' '\n' | sed 's|$|/nvidia/*/lib/libnvrtc.so*|') \
        2>/dev/null | grep -v alt | sort -V | tail -1)
  if [ -n "$NV" ]; then
    mkdir -p "$OUTDIR/lib"
    ln -sf "$NV" "$OUTDIR/lib/libnvrtc.so"
    export LD_LIBRARY_PATH="$(cd "$OUTDIR/lib" && pwd):$(dirname "$NV")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "NVRTC: $NV"
  fi
fi

