#!/usr/bin/env bash
# Creates .bench-venv (gitignored): the other trackers that scripts/bench/bench_log.py compares
# reslog against. They live in their own venv so the project's venv stays clean; each one runs
# in a subprocess of this venv's python and reports JSON (scripts/bench/competitors.py).
#   bash scripts/bench/setup_competitors.sh            # create or update
#   BENCH_VENV=/elsewhere bash scripts/bench/setup_competitors.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${BENCH_VENV:-.bench-venv}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# torch, only for TensorBoard's SummaryWriter (torch.utils.tensorboard): the CPU build, pinned
# (an unpinned torch pulls a multi-GB CUDA build). First from the configured indexes and
# find-links (a local wheel), else from PyTorch's CPU index.
if ! "$VENV/bin/python" -m pip install --quiet "torch==2.13.0+cpu" 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet "torch==2.13.0+cpu" \
    --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple
fi
# psutil: the adapters count CPU spent in helper processes (wandb-core).
"$VENV/bin/python" -m pip install --quiet psutil
# Each tracker separately, so one that fails to install does not take the others with it;
# the benchmark reports a missing one as "unavailable: not installed".
for pkg in wandb tensorboard mlflow trackio; do
  if ! "$VENV/bin/python" -m pip install --quiet "$pkg"; then
    echo "setup_competitors: could not install $pkg (its row will read unavailable)" >&2
  fi
done
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
for name in ("wandb", "tensorboard", "mlflow", "trackio", "torch"):
    try:
        print(f"{name:12s} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name:12s} missing")
PY
