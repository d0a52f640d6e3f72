#!/usr/bin/env bash
# The test command: set up .venv, then lint and run the whole suite. Arguments go to pytest:
# `bash scripts/test.sh -m "not integration"` is the fast lane (no sshd, PostgreSQL, browser,
# second user, child process or resplot window: tests/lanes.py says which tests those are),
# `bash scripts/test.sh tests/resplot/data` runs one folder.
# In CI (CI=true) a test that needs a missing system service (sshd, PostgreSQL) fails
# instead of skipping: see tests/fixtures/postgres.py:missing_system_dependency.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
if [ "${CI:-}" = "true" ]; then
    export RESLOG_REQUIRE_SYSTEM_DEPS=1
fi
export QT_QPA_PLATFORM=offscreen
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Two worker processes (pytest-xdist): much of the suite's time is spent waiting on the
# processes it starts (torchrun ranks, sshd, PostgreSQL, headless Chromium, the GUI soak); with
# two it takes about 14 minutes here. RESLOG_TEST_WORKERS=0 runs it in one process.
exec .venv/bin/python -m pytest -q -rs -n "${RESLOG_TEST_WORKERS:-2}" "$@"
