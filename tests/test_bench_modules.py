"""make bench runs every kernels/**/bench*.py: each must be a benchmark module."""

import importlib
import inspect

from course import bench


def test_every_bench_file_is_a_benchmark_module():
    modules = bench.discover()
    assert "kernels.attention.bench" in modules and "kernels.matmul.hopper.bench" in modules
    for name in modules:
        run = getattr(importlib.import_module(name), "run", None)
        assert callable(run), f"{name} is named like a benchmark (bench*.py) but has no run()"
        assert "quick" in inspect.signature(run).parameters, f"{name}.run takes no quick="


def test_each_word_picks_its_modules_whether_exact_or_a_part():
    """An exact module name picks that one alone, a part picks every module containing it, and
    one word's exact match does not swallow the others (``bench_overhead rmsnorm`` once ran
    only the overhead bench)."""
    modules = ["kernels.bench_overhead", "kernels.matmul.bench", "kernels.matmul.bench_mma",
               "kernels.rmsnorm.bench"]
    assert bench.choose(modules, []) == modules
    assert bench.choose(modules, ["kernels.matmul.bench"]) == ["kernels.matmul.bench"]
    assert bench.choose(modules, ["matmul"]) == ["kernels.matmul.bench",
                                                 "kernels.matmul.bench_mma"]
    assert bench.choose(modules, ["kernels.bench_overhead", "rmsnorm"]) == [
        "kernels.bench_overhead", "kernels.rmsnorm.bench"]
    assert bench.choose(modules, ["nothing"]) == []
