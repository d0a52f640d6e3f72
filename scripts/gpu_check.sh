#!/usr/bin/env bash
# Every "On the GPU" check of issue 25 in one command, on a machine with a CUDA GPU (docs/gpu.md):
#
#   bash scripts/gpu_wheels.sh                  # here, once: the wheels the GPU host lacks -> .whl/
#   bash scripts/gpu_check.sh OUTDIR            # there: at most 7 minutes, set-up included
#
# Writes OUTDIR/<check>.json, OUTDIR/report.md and OUTDIR/logs/*.log, prints the summary table.
# Exit: 0 all met, 1 something not met (or did not run), 3 no CUDA here (nothing else is done).
# Environment: PYTHON (python3), GPU_CHECK_ONLY (comma list of: telemetry nosync kernel_parity
# speed ddp_resume pytest variants), GPU_CHECK_BUDGET_S (420, set-up included: no step starts
# with less than 20 s of it left; the speed variants, tried only when MFU is below target, stop
# when GPU_CHECK_VARIANTS_S (150) more is spent), GPU_CHECK_DATA (prepared data to reuse),
# GPU_CHECK_VENV (a ready environment; default: .whl/ into .gpu-site), GPU_CHECK_CPU_DRY_RUN=1 (no GPU needed: every check runs its CPU dry
# run on a tiny model, to test this script and the checks' own code; tests/test_gpu_check.py).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash scripts/gpu_check.sh OUTDIR}
PY=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET_S:-420}
ONLY=${GPU_CHECK_ONLY:-telemetry,nosync,kernel_parity,speed,ddp_resume,pytest,variants}
START=$(date +%s)
DRY=()
SLOW=1  # a CPU dry run's tiny models on a shared CPU: its steps get 4 times the GPU's limits
if [ -n "${GPU_CHECK_CPU_DRY_RUN:-}" ]; then
    DRY=(--cpu-dry-run)
    SLOW=4
    BUDGET=${GPU_CHECK_BUDGET_S:-$((420 * SLOW))}
fi

[ -n "${DRY[*]}" ] || "$PY" - <<'EOF'
import sys
try:
    import torch
except ImportError:
    print("gpu_check: torch is not installed for this python: nothing checked", file=sys.stderr)
    sys.exit(3)
if not torch.cuda.is_available():
    print(f"gpu_check: no CUDA device here (torch {torch.__version__}: "
          "torch.cuda.is_available() is False). The GPU checks need a GPU machine; nothing was "
          "checked (docs/gpu.md).", file=sys.stderr)
    sys.exit(3)
print(f"gpu_check: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
      f"CUDA {torch.version.cuda}")
EOF
rc=$?
[ "$rc" = 0 ] || exit "$rc"

mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
LOGS="$OUT/logs"
wants() { case ",$ONLY," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
left() { echo $((BUDGET - ($(date +%s) - START))); }

# --- what the GPU host lacks, from the wheels carried in .whl/, installed into a folder of its
# own put first on PYTHONPATH. Not a venv: a GPU image's python3 is often a venv itself, and a
# `venv --system-site-packages` made from it sees the base interpreter's packages, not its torch.
# GPU_CHECK_VENV names a ready environment instead (the CPU dry run's test uses the project's).
SITE=""
if [ -n "${GPU_CHECK_VENV:-}" ]; then
    VPY="$GPU_CHECK_VENV/bin/python"
else
    VPY="$PY"
    SITE=${GPU_CHECK_SITE:-$PWD/.gpu-site}
fi
if [ -n "${DRY[*]}" ]; then
    echo "gpu_check: CPU dry run: no GPU checked, every number below means nothing"
elif [ -n "$SITE" ] && [ -d .whl ]; then
    # --target ignores what is installed, so SQLAlchemy and Alembic bring their dependencies
    # from .whl; the kernels' own (torch, triton, numpy) are the host's: --no-deps. One at a
    # time: an optional kernel that will not install must not block the rest.
    for spec in "SQLAlchemy alembic" "--no-deps liger-kernel" "--no-deps xformers"; do
        # shellcheck disable=SC2086
        "$VPY" -m pip install -q --no-index --find-links .whl --target "$SITE" --upgrade \
            --no-compile $spec >>"$LOGS/pip.log" 2>&1 \
            || echo "gpu_check: ${spec#--no-deps } not installed (see $LOGS/pip.log)"
    done
elif [ -n "$SITE" ]; then
    echo "gpu_check: no .whl/ here (run scripts/gpu_wheels.sh where there is network, carry .whl)"
fi
export PYTHONPATH="${SITE:+$SITE:}$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$VPY" -c "import sqlalchemy, alembic" 2>/dev/null \
    || { echo "gpu_check: SQLAlchemy/Alembic missing: reslog cannot run"; exit 1; }

# --- real token data: source files of an installed library, through trainer.prepare
DATA=${GPU_CHECK_DATA:-$OUT/data}
if [ ! -f "$DATA/manifest.json" ]; then
    ROOT=$("$VPY" -c "import os, transformers; print(os.path.dirname(transformers.__file__))" \
        2>/dev/null || echo "")
    {
        "$VPY" -m trainer.corpus --out "$OUT/corpus.jsonl" ${ROOT:+--root "$ROOT"} \
            --max-mb "$([ -n "${DRY[*]}" ] && echo 1 || echo 30)" &&
        "$VPY" -m trainer.prepare --input "$OUT/corpus.jsonl" --out "$DATA" --force \
            --vocab-size "$([ -n "${DRY[*]}" ] && echo 512 || echo 32768)" \
            --tokenizer-max-chars "$([ -n "${DRY[*]}" ] && echo 200000 || echo 8000000)"
    } >"$LOGS/prepare.log" 2>&1 || { echo "gpu_check: data preparation failed ($LOGS/prepare.log)"; DATA=""; }
fi
DATA_ARG=()
# (A dry run's tiny models keep their own synthetic data: it only checks that prepare ran.)
[ -n "$DATA" ] && [ -z "${DRY[*]}" ] && DATA_ARG=(--data "$DATA")

# --- the checks, each under a time limit, logs kept
step() {  # step NAME CAP_SECONDS COMMAND...
    local name=$1 cap=$(($2 * SLOW))
    shift 2
    local limit=$(( $(left) < cap ? $(left) : cap ))
    if [ "$limit" -lt 20 ]; then
        echo "gpu_check: $name skipped: the ${BUDGET}s budget is spent"
        return
    fi
    echo "gpu_check: $name (at most ${limit}s)"
    timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
    local rc=$?
    [ "$rc" = 124 ] && echo "gpu_check: $name ran past ${limit}s (see $LOGS/$name.log)"
    tail -n 2 "$LOGS/$name.log"
}

# Timed checks alone on the card, one after another: telemetry compares NVML with nvidia-smi
# under a load of its own, and speed's MFU and on/off overhead need an otherwise idle GPU.
wants telemetry && step telemetry 60 "$VPY" scripts/gpu/telemetry.py --out "$OUT" "${DRY[@]}"
wants nosync && step nosync 90 "$VPY" scripts/gpu/nosync.py --out "$OUT" "${DRY[@]}"
wants speed && step speed 200 "$VPY" scripts/gpu/speed.py --out "$OUT" "${DATA_ARG[@]}" "${DRY[@]}"
# Correctness only (no timing judged): side by side, so the whole check fits in 7 minutes on one
# GPU (a 141 GB card holds all three; the host's 16 cores compile ddp_resume meanwhile).
wants kernel_parity && step kernel_parity 120 "$VPY" scripts/gpu/kernel_parity.py --out "$OUT" "${DRY[@]}" &
wants ddp_resume && step ddp_resume 150 "$VPY" scripts/gpu/ddp_resume.py --out "$OUT" "${DATA_ARG[@]}" "${DRY[@]}" &
if wants pytest; then
    # The parity cases ran above (same code, kernel_parity.py); GPU_CHECK_PYTEST_ALL=1 reruns them.
    K=(-k "not kernel_agrees")
    [ -n "${GPU_CHECK_PYTEST_ALL:-}" ] && K=()
    step pytest 120 "$VPY" -m pytest -q -rs -m cuda "${K[@]}" -p no:cacheprovider \
        --junitxml "$OUT/pytest-cuda.xml" tests/trainer/test_cuda.py tests/trainer/test_kernels.py
    "$VPY" scripts/gpu/summary.py --out "$OUT" --pytest-junit "$OUT/pytest-cuda.xml" "${DRY[@]}" \
        >/dev/null
fi
wait

# --- below the MFU target: what moves it, each change measured alone (budget permitting)
below=$("$VPY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(int(d['ok'] is False))" \
    "$OUT/speed.json" 2>/dev/null || echo 0)
if wants variants && { [ "$below" = 1 ] || [ -n "${DRY[*]}" ]; }; then
    # Measured on time of their own, after the seven checks' budget.
    BUDGET=$((BUDGET + ${GPU_CHECK_VARIANTS_S:-150}))
    V=("$VPY" scripts/gpu/speed.py --out "$OUT" "${DATA_ARG[@]}" "${DRY[@]}" --overhead-pairs 0
        --profile never --steps 15)
    step speed-batch64 120 "${V[@]}" --variant batch64 --set --data.batch_size 64
    step speed-ce-eager 120 "${V[@]}" --variant ce-eager --kernels cross_entropy=eager
    step speed-attn-sdpa 120 "${V[@]}" --variant attn-sdpa --kernels attention=sdpa
    step speed-accum8 150 "${V[@]}" --variant accum8 --set --data.grad_accum 8
    step speed-ce-liger 120 "${V[@]}" --variant ce-liger --kernels cross_entropy=liger
    step speed-autotune 240 "${V[@]}" --variant autotune --compile-mode max-autotune-no-cudagraphs
fi

echo
EXPECT=()  # the result files the asked-for steps write (speed writes three)
for c in ${ONLY//,/ }; do
    case $c in
        speed) EXPECT+=(speed timers overhead) ;;
        pytest) EXPECT+=(pytest_cuda) ;;
        variants) ;;
        *) EXPECT+=("$c") ;;
    esac
done
EXPECT_LIST=$(IFS=,; echo "${EXPECT[*]}")
"$VPY" scripts/gpu/summary.py --out "$OUT" --expect "$EXPECT_LIST"
rc=$?
echo "gpu_check: $(( $(date +%s) - START ))s in all"
exit $rc
