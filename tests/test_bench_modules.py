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
