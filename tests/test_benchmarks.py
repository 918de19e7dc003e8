"""benchmarks/workflow_times.py names the machine a run's times come from (docs/benchmarks.md: a row per class)."""

import importlib.util
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
AVX2_ONLY = "model name\t: AMD EPYC 7B13\nflags\t\t: fpu sse4_2 avx fma f16c avx2 bmi2 vaes\n"
AVX512 = "model name\t: AMD EPYC 9B45\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_bf16 avx512_vnni\n"


def load(name):
    spec = importlib.util.spec_from_file_location(name, REPO / f"benchmarks/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_vector_extensions_tell_an_avx2_only_cpu_from_an_avx512_one():
    times = load("workflow_times")
    assert times.cpu_flags(AVX2_ONLY) == ("AMD EPYC 7B13", ["sse4_2", "avx", "avx2", "fma", "f16c"])
    model, flags = times.cpu_flags(AVX512)
    assert model == "AMD EPYC 9B45" and {"avx512f", "avx512_bf16", "avx512_vnni"} <= set(flags)
    assert "avx512f" not in times.cpu_flags(AVX2_ONLY)[1]


def test_the_machine_names_torchs_kernels_and_what_restricts_them(tmp_path, monkeypatch, capsys):
    times = load("workflow_times")
    (tmp_path / "cpuinfo").write_text(AVX512)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    info = times.machine(tmp_path / "cpuinfo")
    assert info["CPU"].startswith("AMD EPYC 9B45") and "avx512f" in info["vector extensions (CPU)"]
    assert info["torch CPU capability"] == torch.backends.cpu.get_cpu_capability()
    assert "ATEN_CPU_CAPABILITY=avx2" in info["kernel environment"]
    times.main(["--machine"])  # no run needed
    assert "torch CPU capability:" in capsys.readouterr().out
