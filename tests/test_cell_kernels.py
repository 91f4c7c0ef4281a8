"""Which kernel files a notebook cell runs, read from the code (course_utils.cell_kernels)."""

from course_utils import cell_kernels


def test_a_name_from_a_package_leads_to_the_child_that_defines_it():
    sources = ["from kernels.model import COURSE, Transformer",
               "%%requires cuda\nTransformer(COURSE)"]
    files = cell_kernels.kernel_files(sources, 1)
    assert "kernels/model/__init__.py" in files
    assert {"kernels/model/config.py", "kernels/model/transformer.py"} <= files, sorted(files)
    # the package's other children (figures, bench) are not run by naming COURSE
    assert "kernels/model/figures.py" not in files, sorted(files)
    assert not any(f.startswith("kernels/attention/hopper/") for f in files), sorted(files)


def test_cuda_files_named_by_a_module_and_their_includes_count():
    files = cell_kernels.kernel_files(["from kernels.attention.hopper import fwd", "fwd"], 1)
    assert {"kernels/attention/hopper/attention.cu", "kernels/attention/hopper/attention.cuh",
            "kernels/matmul/hopper/hopper.cuh"} <= files, sorted(files)


def test_a_cell_that_imports_nothing_of_the_course_runs_no_kernel_file():
    assert cell_kernels.kernel_files(["import torch", "%%requires cuda\ntorch.ones(1)"], 1) == set()
