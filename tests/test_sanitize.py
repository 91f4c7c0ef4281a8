"""The sanitizer over every registered CUDA kernel (kernels/sanitize.py): which kernels it
takes, how it reads compute-sanitizer's output and says which kernel has the errors; on a GPU,
the run itself, whose summary goes to docs/results/<device-slug>-sanitizer.txt."""

import pytest
import torch

import kernels
from course_utils import env, sanitizer
from kernels import sanitize
from kernels.registry import OPS


def test_every_nvcc_or_nvrtc_kernel_is_taken_and_no_other():
    taken = {k.name for k in sanitize.cuda_kernels()}
    for kernel in kernels.all_kernels():
        assert (kernel.name in taken) == bool({"nvcc", "nvrtc"} & set(kernel.needs)), kernel.name
    for op in ("add", "gelu", "matmul"):  # lessons 05–08 each have CUDA kernels
        assert any(name.startswith(op + "/") for name in taken), op


def test_metadata_opts_a_kernel_in_or_out():
    add = lambda a, b: a + b
    inside = kernels.register("add", "sanitize_test", "in", fn=add, meta={"sanitize": True})
    outside = kernels.register("add", "sanitize_test", "out", fn=add, needs=("nvrtc",),
                               meta={"sanitize": False})
    try:
        names = {k.name for k in sanitize.cuda_kernels(["sanitize_test"])}
        assert names == {inside.name}, (names, outside.name)
    finally:
        kernels.unregister(inside)
        kernels.unregister(outside)


def test_cases_are_small_and_cover_the_kernels_own_dtypes():
    int8 = kernels.get_kernel("matmul", "mma", "int8")
    chosen = sanitize.small_cases(int8, "cpu")
    assert chosen and all(a.numel() <= sanitize.MAX_ELEMENTS
                          for _, _, args in chosen for a in args)
    assert torch.int8 in {dtype for _, dtype, _ in chosen}
    gelu = {case.label for case, _, _ in sanitize.small_cases(
        kernels.get_kernel("gelu", "cuda", "naive"), "cpu")}
    assert "1M" not in gelu and {"odd 1027", "empty", "non-contiguous"} <= gelu


def test_a_kernel_with_two_operand_types_gets_each_its_own():
    # (the op's cases make A and B in one dtype; fp8 e4m3 x e5m2 was "no case fits it" on a GPU)
    name = "fp8_e4m3_e5m2"
    if ("matmul", "mma", name) not in {(k.op, k.provider, k.variant) for k in
                                       kernels.all_kernels()}:
        pytest.skip("this torch has no float8 dtypes")
    mixed = kernels.get_kernel("matmul", "mma", name)
    for _, _, (a, b, *_) in sanitize.small_cases(mixed, "cpu"):
        assert (a.dtype, b.dtype) == (torch.float8_e4m3fn, torch.float8_e5m2)
    for case in OPS["matmul"].cases:  # the conversion keeps each operand's layout
        made = case.make(torch.bfloat16, "cpu")
        converted = sanitize._operand_types(mixed, made)
        assert [t.stride() for t in converted[:2]] == [t.stride() for t in made[:2]], case.label


MEMCHECK = """\
========= COMPUTE-SANITIZER
@@sanitize add/nvrtc | ran 9 cases
@@sanitize matmul/mma[int4] | skipped: needs sm_80+; this GPU is sm_75
========= Invalid __global__ read of size 4 bytes
=========     at add_kernel+0x70
========= ERROR SUMMARY: 1 error
"""
RACECHECK = "========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)\n"


def test_the_output_is_read_for_statuses_and_counts():
    assert sanitize.statuses(MEMCHECK) == {"add/nvrtc": "ran 9 cases",
                                           "matmul/mma[int4]": "skipped: needs sm_80+; "
                                                               "this GPU is sm_75"}
    assert sanitizer.Run("x", MEMCHECK, 1).counts() == (1, 0)
    assert sanitizer.Run("x", RACECHECK, 1).counts() == (1, 2)
    assert sanitizer.Run("x", "Segmentation fault", 139).counts() is None
    assert sanitizer.Run("x", "========= ERROR SUMMARY: 0 errors\n", 0).clean


def test_errors_are_attributed_by_running_each_kernel_alone(monkeypatch):
    def fake_run(tool, module, *args):
        assert (tool, module, args[0]) == ("initcheck", "kernels.sanitize", "--workload")
        names = args[1:]
        lines = [f"@@sanitize {n} | ran 3 cases" for n in names]
        bad = "b/cuda" in names  # kernel b reads memory nobody wrote
        lines.append(f"========= ERROR SUMMARY: {2 if bad else 0} errors")
        return sanitizer.Run("compute-sanitizer --tool initcheck", "\n".join(lines), int(bad))

    monkeypatch.setattr(sanitizer, "run_module", fake_run)
    result = sanitize.run_tool("initcheck", ["a/cuda", "b/cuda", "c/cuda"])
    assert result.verdicts == {"a/cuda": "clean", "b/cuda": "2 errors", "c/cuda": "clean"}
    text = sanitize.render([result], ["a/cuda", "b/cuda", "c/cuda"])
    assert "b/cuda  2 errors" in text and "2 of 3 kernels clean under initcheck" in text


def test_a_kernel_the_workload_never_reached_is_not_clean():
    assert sanitize._verdict("", (0, 0)).startswith("did not run")
    assert sanitize._verdict("ran 2 cases", None).startswith("no sanitizer summary")
    assert sanitize._verdict("failed on empty float32: RuntimeError: x", (0, 0)).startswith(
        "failed")


def test_run_all_runs_the_tools_side_by_side_in_order(monkeypatch):
    import time

    def slow_run(tool, module, *args, timeout=0):
        time.sleep(0.6 if tool == "memcheck" else 0.4)  # the first one finishes last
        return sanitizer.Run(f"{tool} {module}", "========= ERROR SUMMARY: 0 errors\n", 0)

    monkeypatch.setattr(sanitizer, "run_module", slow_run)
    start = time.perf_counter()
    runs = sanitizer.run_all(("memcheck", "racecheck", "synccheck"), "kernels.x")
    assert time.perf_counter() - start < 1.2  # one after the other: 1.4 s
    assert [r.command for r in runs] == ["memcheck kernels.x", "racecheck kernels.x",
                                         "synccheck kernels.x"]


def test_an_unknown_tool_is_refused_by_name():
    with pytest.raises(ValueError, match="tool expected one of memcheck.*got 'memchek'"):
        sanitizer.run_module("memchek", "kernels.sanitize")


@pytest.mark.gpu
@pytest.mark.slow
def test_every_cuda_kernel_is_clean_under_the_sanitizer(capsys):
    if sanitizer.path() is None:
        message = "compute-sanitizer not found next to nvcc or on PATH"
        pytest.fail(message + " (COURSE_STRICT=1: a GPU box has it)") if env.STRICT \
            else pytest.skip(message)
    status = sanitize.main([])  # writes docs/results/<device-slug>-sanitizer.txt
    out = capsys.readouterr().out
    assert status == 0, out
    assert (env.RESULTS_DIR / f"{env.device_slug()}-sanitizer.txt").exists()


def test_a_part_reports_what_it_ran_skipped_or_failed_on(capsys):
    # (the status lines every workload prints: kernels/sanitize.py's, the Hopper attention's,
    # the Triton attention's; statuses() reads them back)
    def cases(fail_at=None, skip=False):
        if skip:
            raise sanitize.Skip("needs sm_89+")
        for label in ("ragged 77", "causal 130"):
            yield label
            if label == fail_at:
                raise RuntimeError("CUDA error: an illegal memory access\nmore detail")

    def broken_inputs():
        raise ValueError("no inputs")
        yield "never"

    assert sanitize.part("a/ok", cases()) == 0
    assert sanitize.part("a/problems", cases(), "problems") == 0
    assert sanitize.part("a/late", cases(fail_at="causal 130")) == 1
    assert sanitize.part("a/early", cases(fail_at="ragged 77")) == 1
    assert sanitize.part("a/skip", cases(skip=True)) == 0
    assert sanitize.part("a/inputs", broken_inputs()) == 1
    out = capsys.readouterr().out
    assert sanitize.statuses(out) == {
        "a/ok": "ran 2 cases", "a/problems": "ran 2 problems",
        "a/late": "failed on causal 130: RuntimeError: CUDA error: an illegal memory access",
        "a/early": "failed on ragged 77: RuntimeError: CUDA error: an illegal memory access",
        "a/skip": "skipped: needs sm_89+",
        "a/inputs": "failed on making the inputs: ValueError: no inputs"}
    assert all(line.startswith(sanitize.MARK + " ") for line in out.splitlines())


def test_the_attention_workloads_report_every_part_without_a_gpu(capsys):
    # (on a GPU they run under compute-sanitizer: gpu_run --only sanitize, sanitize_triton)
    if env.HAS_CUDA:
        pytest.skip("on a GPU the workloads run the kernels")
    from kernels.attention import sanitize_triton
    from kernels.attention.hopper import sanitize_attention

    assert sanitize_triton.workload() == 1
    assert sanitize_attention.varlen_workload() == 1
    assert sanitize_attention.backward_workload() == 1
    status = sanitize.statuses(capsys.readouterr().out)
    assert list(status) == [*sanitize_triton.PARTS, "attention/wgmma varlen",
                            "attention/wgmma backward", "attention/wgmma[fused_bwd] backward"]
    assert all(s.startswith(("failed on ", "skipped: ")) for s in status.values()), status


def test_the_workload_says_why_a_kernel_cannot_run_here(capsys):
    if env.HAS_CUDA:
        pytest.skip("on a GPU the workload runs the kernels (the GPU test above)")
    assert sanitize.workload(["add/nvrtc"]) == 0
    status = sanitize.statuses(capsys.readouterr().out)
    assert list(status) == ["add/nvrtc"] and status["add/nvrtc"].startswith("skipped: ")
