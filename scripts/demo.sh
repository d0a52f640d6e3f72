#!/usr/bin/env bash
# The demo: set up .venv, train a small LLaMA-style model on CPU logging to runs/reslog.db,
# then show it in resplot (or write runs/demo.png and runs/demo.csv when there is no display).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
exec .venv/bin/python scripts/demo.py "$@"
