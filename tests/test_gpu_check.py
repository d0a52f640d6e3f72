"""The GPU check (scripts/gpu_check.sh, scripts/gpu/*.py, scripts/check_nvml.py) as far as it
runs without a GPU: each script refuses with exit 3 and a sentence, runs its CPU dry run on a
tiny model (the same code as on the GPU, the numbers never judged), writes its result, and the
summary turns results into a table and an exit code. NVML and nvidia-smi cannot run here:
`FakeNvml` (tests/reslog/training/test_system.py) and a stand-in `nvidia-smi` script take their
place, and say so; the real ones are what scripts/gpu_check.sh checks on a GPU host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "scripts" / "gpu"
sys.path.insert(0, str(GPU))
sys.path.insert(0, str(REPO / "scripts"))

import check_nvml  # noqa: E402
import gpucheck  # noqa: E402
import summary  # noqa: E402
import telemetry  # noqa: E402

from reslog.training.system import visible_devices  # noqa: E402
from tests.reslog.training.test_system import FakeNvml, gpu  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def run(cmd: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, cwd=REPO, env={**ENV, **env}, capture_output=True, text=True, timeout=400
    )


# --------------------------------------------------------------------------- no CUDA here


@pytest.mark.integration
@pytest.mark.parametrize("script", ["telemetry", "nosync", "kernel_parity", "speed", "ddp_resume"])
def test_each_check_refuses_without_cuda_and_writes_nothing(tmp_path, script):
    proc = run([sys.executable, str(GPU / f"{script}.py"), "--out", str(tmp_path / "out")])
    assert proc.returncode == gpucheck.EXIT_NO_CUDA == 3
    assert "no CUDA device here" in proc.stderr and "--cpu-dry-run" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.integration
def test_gpu_check_sh_says_there_is_no_cuda_and_exits_3(tmp_path):
    proc = run(["bash", "scripts/gpu_check.sh", str(tmp_path / "out")], PYTHON=sys.executable)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "no CUDA device here" in proc.stderr and "nothing was checked" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.integration
def test_the_scripts_arguments_are_parsed():
    proc = run([sys.executable, str(GPU / "speed.py"), "--help"])
    assert proc.returncode == 0 and "--target-mfu" in proc.stdout
    proc = run([sys.executable, str(GPU / "telemetry.py")])  # --out is required
    assert proc.returncode == 2 and "--out" in proc.stderr


# --------------------------------------------------------------------------- CPU dry runs


@pytest.mark.integration
@pytest.mark.slow
def test_gpu_check_sh_dry_run_prepares_data_runs_the_steps_and_reports(tmp_path):
    out = tmp_path / "out"
    proc = run(
        ["bash", "scripts/gpu_check.sh", str(out)],
        PYTHON=sys.executable,
        GPU_CHECK_CPU_DRY_RUN="1",
        GPU_CHECK_VENV=str(Path(sys.executable).parent.parent),
        GPU_CHECK_ONLY="kernel_parity,pytest",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "data" / "manifest.json").is_file()  # trainer.prepare ran on real text
    assert (out / "logs" / "kernel_parity.log").is_file()
    report = (out / "report.md").read_text()
    assert "4. kernels agree in bf16" in report and "tests marked cuda" in report
    parity = json.loads((out / "kernel_parity.json").read_text())
    assert parity["ok"] is None and parity["dry_run"] is True  # a dry run is never a verdict
    tests = json.loads((out / "pytest_cuda.json").read_text())
    assert tests["details"]["skipped"] >= 3 and "needs a CUDA GPU" in tests["summary"]
    assert "measured" in proc.stdout and "NOT MET" not in proc.stdout


@pytest.mark.slow  # 4-28 s of CPU: out of the fast lane
def test_nosync_dry_run_stores_exactly_what_was_logged(tmp_path):
    import nosync

    code = nosync.main(
        [
            "--out",
            str(tmp_path),
            "--cpu-dry-run",
            "--steps",
            "40",
            "--keys",
            "3",
            "--trainer-steps",
            "3",
        ]
    )
    result = json.loads((tmp_path / "nosync.json").read_text())
    assert code == 0 and result["ok"] is None
    d = result["details"]
    assert d["values_checked"] == d["values_equal"] == 120
    assert d["training_thread_error"] is None and d["trainer"]["loss_points"] >= 3


@pytest.mark.slow  # 4-28 s of CPU: out of the fast lane
def test_kernel_parity_dry_run_compares_the_cases_a_cpu_runs(tmp_path):
    import kernel_parity

    try:
        code = kernel_parity.main(
            [
                "--out",
                str(tmp_path),
                "--cpu-dry-run",
                "--only",
                "sdpa[math],F.rms_norm,cross_entropy eager,AdamW fused,liger cross_entropy",
            ]
        )
    finally:
        kernel_parity.DEVICE = "cuda"
    result = json.loads((tmp_path / "kernel_parity.json").read_text())
    rows = result["details"]["rows"]
    assert code == 0 and result["ok"] is None
    assert {r["case"] for r in rows} == {
        "sdpa[math]",
        "F.rms_norm",
        "cross_entropy eager",
        "AdamW fused vs foreach",
    }
    assert all(r["ok"] for r in rows)
    loss = next(r for r in rows if r["case"] == "cross_entropy eager" and "loss" in r["output"])
    assert loss["output"] == "loss (float32)" and loss["err"] < 1e-5


def test_speed_dry_run_writes_speed_timers_and_overhead(tmp_path):
    import speed

    code = speed.main(
        [
            "--out",
            str(tmp_path),
            "--cpu-dry-run",
            "--steps",
            "4",
            "--warmup",
            "1",
            "--overhead-pairs",
            "2",
            "--overhead-chunk",
            "2",
            "--profile",
            "never",
        ]
    )
    assert code == 0
    s = json.loads((tmp_path / "speed.json").read_text())
    assert s["details"]["tokens_per_s"] > 0 and s["details"]["runtime"]["n_params"] > 0
    t = json.loads((tmp_path / "timers.json").read_text())
    assert t["details"]["steps_resolved"] == 4
    o = json.loads((tmp_path / "overhead.json").read_text())
    assert len(o["details"]["ratios"]) == 2
    # Each "on" chunk was a reslog run of its own, holding 20 scalars a step.
    points = gpucheck.read_points(tmp_path / "overhead.db", "overhead-0")
    per_step = {k for k, v in points.items() if not k.startswith("sys/") and len(v) >= 2}
    assert len(per_step) >= 18, sorted(per_step)


@pytest.mark.integration
@pytest.mark.slow
def test_ddp_resume_dry_run_uses_ddp_under_torchrun_and_continues_bit_for_bit(tmp_path):
    proc = run(
        [
            sys.executable,
            str(GPU / "ddp_resume.py"),
            "--out",
            str(tmp_path),
            "--cpu-dry-run",
            "--steps",
            "6",
            "--ckpt-at",
            "3",
        ]
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    d = json.loads((tmp_path / "ddp_resume.json").read_text())["details"]
    assert d["ddp"] is True and d["world_size"] == 1  # one process, still a process group + DDP
    assert d["steps_compared"] == 3 and d["bitwise_equal"] == 3


# --------------------------------------------------------------------------- summary


def _result(out: Path, name: str, ok, text: str) -> None:
    r = gpucheck.Result(name, out)
    r.ok, r.summary = ok, text
    r.write()


def test_summary_table_and_exit_code(tmp_path, capsys):
    _result(tmp_path, "telemetry", True, "all fields")
    _result(tmp_path, "speed", False, "MFU 41 %")
    code = summary.main(["--out", str(tmp_path), "--expect", "telemetry,speed,nosync"])
    printed = capsys.readouterr().out
    assert code == 1
    assert "NOT MET" in printed and "did not run" in printed and "met" in printed
    report = (tmp_path / "report.md").read_text()
    assert "| 5. speed and MFU | NOT MET | MFU 41 % |" in report
    _result(tmp_path, "speed", True, "MFU 55 %")
    _result(tmp_path, "nosync", None, "measured")
    assert summary.main(["--out", str(tmp_path), "--expect", "telemetry,speed,nosync"]) == 0


def test_pytest_junit_becomes_a_result(tmp_path):
    junit = tmp_path / "j.xml"
    junit.write_text(
        '<testsuites><testsuite tests="3" failures="1" errors="0" skipped="1">'
        '<testcase name="a"/><testcase name="b"><failure message="x"/></testcase>'
        '<testcase name="c"><skipped message="flash_attn is not installed"/></testcase>'
        "</testsuite></testsuites>"
    )
    summary.pytest_result(tmp_path, junit)
    r = json.loads((tmp_path / "pytest_cuda.json").read_text())
    assert r["ok"] is False and r["details"]["failed"] == ["b"]
    assert r["summary"] == "1 passed, 1 failed, 1 skipped (flash_attn is not installed)"


# --------------------------------------------------------------------------- NVML and nvidia-smi


def test_every_field_gives_a_value_or_nvmls_reason():
    # FakeNvml: no GPU here; it raises pynvml's own error classes, as the driver does.
    nvml = FakeNvml([gpu(0)], broken={0: {"fan": pynvml.NVML_ERROR_NOT_SUPPORTED}})
    rows = check_nvml.field_report(nvml, visible_devices(nvml, environ={}))
    by = {r["field"]: r for r in rows}
    assert set(by) == {"util", "mem", "temp", "power", "power_limit", "fan", "sm_clock", "throttle"}
    assert by["fan"]["error"].startswith("NVMLError_NotSupported")
    assert "value" in by["temp"] and len(by["mem"]["value"]) == 2


def test_nvidia_smi_lines_are_parsed_in_reslogs_units():
    names = check_nvml.smi_query_names()
    line = "87, 40960, 81559, 61, 312.45, 700.00, [N/A], 1980, 0x0000000000000004"
    got = check_nvml.parse_smi_line(line, names)
    assert got["memory.used"] == 40.0 and got["fan.speed"] is None
    assert got["clocks_event_reasons.active"] == 4.0 and got["power.draw.instant"] == 312.45
    with pytest.raises(ValueError, match="9 fields"):
        check_nvml.parse_smi_line("1, 2", names)


def test_readings_are_judged_against_the_range_of_ours_with_a_tolerance():
    names = check_nvml.smi_query_names()

    def fields(temp, power, fan=None, throttle=4):
        rows = [
            {"field": "temp", "value": temp},
            {"field": "power", "value": power},
            {"field": "throttle", "value": throttle},
        ]
        rows.append({"field": "fan", "value": fan} if fan is not None else {"field": "fan"})
        return rows

    smi = {
        "temperature.gpu": 62.0,
        "power.draw.instant": 330.0,
        "fan.speed": None,
        "clocks_event_reasons.active": 4.0,
    }
    rows = {
        r["field"]: r
        for r in check_nvml.compare_round(fields(60, 300), smi, fields(61, 320), names)
    }
    assert rows["temperature.gpu"]["ok"]  # 62 is within 2 °C of [60, 61]
    assert rows["power.draw.instant"]["ok"]  # 330 within 10 % of [300, 320]
    assert rows["fan.speed"]["ok"] and rows["fan.speed"]["note"] == "unsupported on both"
    assert rows["clocks_event_reasons.active"]["ok"]
    smi["temperature.gpu"] = 70.0
    smi["fan.speed"] = 30.0
    rows = {
        r["field"]: r
        for r in check_nvml.compare_round(fields(60, 300), smi, fields(61, 320), names)
    }
    assert not rows["temperature.gpu"]["ok"]
    assert not rows["fan.speed"]["ok"] and "one side only" in rows["fan.speed"]["note"]


def test_an_older_driver_gets_the_older_spelling_of_a_field(tmp_path, monkeypatch):
    # A stand-in nvidia-smi (none here) that knows only clocks_throttle_reasons, as older
    # drivers do, and answers with one line of values.
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *clocks_event_reasons*) '
        "echo 'Field \"clocks_event_reasons.active\" is not a valid field to query.'; "
        "exit 2;; esac\n"
        "echo '87, 40960, 81559, 61, 312.45, 700.00, [N/A], 1980, 0x0000000000000001'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    line, names = check_nvml.run_smi(0, check_nvml.smi_query_names())
    assert "clocks_throttle_reasons.active" in names
    assert check_nvml.parse_smi_line(line, names)["clocks_throttle_reasons.active"] == 1.0


def test_stored_telemetry_is_judged_by_count_and_spacing():
    pts = {
        "sys/gpu0/util": [(0, 100.0 + i, 50.0) for i in range(8)],
        "sys/gpu0/temp_c": [(0, 100.0 + 3 * i, 60.0) for i in range(3)],
    }
    rows = telemetry.stored_every_second(
        pts, ["sys/gpu0/util", "sys/gpu0/temp_c", "sys/gpu0/throttle"], seconds=8
    )
    assert [r["ok"] for r in rows] == [True, False, False]
    assert rows[2]["points"] == 0


def test_a_child_python_keeps_the_pythonpath_it_was_given(monkeypatch, tmp_path):
    # On the H200 (2026-11-27) ddp_resume's torchrun children lost gpu_check.sh's .gpu-site and
    # could not import SQLAlchemy: the environment they got named the repository alone.
    site = tmp_path / ".gpu-site"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(gpucheck.ROOT)]))
    path = gpucheck.child_env()["PYTHONPATH"].split(os.pathsep)
    assert path == [str(gpucheck.ROOT), str(site)]
    monkeypatch.delenv("PYTHONPATH")
    assert gpucheck.child_env()["PYTHONPATH"] == str(gpucheck.ROOT)


def test_a_parity_case_whose_kernel_the_trainer_refuses_is_unusable_not_failed():
    import kernel_parity

    # Here (no CUDA) the trainer's probe refuses xformers' attention, as it refused the
    # wheel built for another torch on the H200; a case without a probe is never excused.
    assert "needs CUDA" in kernel_parity.refused_by_trainer("xformers attention")
    assert kernel_parity.refused_by_trainer("F.rms_norm") is None
