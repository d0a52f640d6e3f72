#!/usr/bin/env bash
# Download, where there is network, the wheels a GPU host without network lacks for
# scripts/gpu_check.sh, into the git-ignored .whl/ (carried to the GPU host; < 64 MiB in all).
#
#   bash scripts/gpu_wheels.sh [PYTHON_VERSION]     # default 3.12, the GPU host's python
#
# The GPU host already has torch (CUDA), triton, nvidia-ml-py, psutil, pyarrow, tokenizers,
# numpy, transformers. Carried: reslog's own dependencies (SQLAlchemy, Alembic, Mako,
# MarkupSafe, greenlet, typing-extensions), pytest for the tests marked cuda, and the optional
# kernels liger-kernel and xformers (built against torch >= 2.10; the GPU check says whether it
# runs). Not carried: flash-attn, which PyPI has only as a source package that needs nvcc and
# a long CUDA build (its wheels are release assets of its repository, not on PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${1:-3.12}
PY=${PYTHON:-.venv/bin/python}
mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: -d .whl \
    --python-version "$PYVER" --implementation cp --abi "cp${PYVER/./}" --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any \
    "SQLAlchemy>=2.0,<3" "alembic>=1.13" mako markupsafe greenlet "typing-extensions>=4.12" \
    pytest pluggy iniconfig "packaging>=24" "pygments>=2.15" pytest-timeout \
    liger-kernel xformers
du -sh .whl
ls .whl
