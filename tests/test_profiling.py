"""course_utils.profiling on whatever device this machine has (CPU in CI)."""

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import torch

from course_utils import env, profiling
from course_utils.profiling import count_kernels, profile, read_folded

DEVICE = env.DEFAULT_DEVICE


@pytest.fixture(scope="module")
def mlp_profile():
    torch.manual_seed(0)
    x = torch.randn(64, 128, device=DEVICE)
    mlp = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(),
                              torch.nn.Linear(256, 128)).to(DEVICE)
    with torch.no_grad():
        return profile(mlp, x, name="test_mlp", show=False, reps=2)


def test_table_is_sorted_by_the_device_metric(mlp_profile):
    assert "Name" in mlp_profile.table
    header = "CUDA total" if DEVICE == "cuda" else "CPU total"
    assert header in mlp_profile.table
    assert "test_mlp" in mlp_profile.table  # the record_function region of each call


def test_mlp_kernels_are_counted_per_call(mlp_profile):
    kernels = mlp_profile.kernels
    if DEVICE == "cpu":
        # two Linear layers and one GELU; nothing for t()/expand() or addmm's bias copy
        assert kernels == {"aten::addmm": 2, "aten::gelu": 1}
    else:
        assert mlp_profile.launches >= 3
        assert any("gelu" in k.lower() for k in kernels)
    assert set(mlp_profile.kernel_ms) == set(kernels)
    assert all(ms > 0 for ms in mlp_profile.kernel_ms.values())
    assert 0 < mlp_profile.kernel_time_ms <= mlp_profile.wall_ms * 1.05 or DEVICE == "cuda"


def test_stacks_file_is_folded_and_rooted_at_the_region(mlp_profile):
    text = mlp_profile.stacks_path.read_text()
    assert mlp_profile.stacks_path.name == "stacks_test_mlp.txt"
    lines = text.splitlines()
    assert lines
    for line in lines:
        assert re.fullmatch(r"[^\n]+ \d+", line), line
        assert line.split(";")[0].split(" ")[0] == "test_mlp"
    stacks = read_folded(mlp_profile.stacks_path)
    leaf = "[GPU]" if DEVICE == "cuda" else "aten::gelu"
    assert any(s.split(";")[-1].startswith(leaf) for s in stacks)
    # the profiler's own frames are not in the stacks
    assert not any("profiler.py" in s for s in stacks)


def test_flame_graph_is_valid_svg(mlp_profile):
    root = ET.parse(mlp_profile.flamegraph_path).getroot()
    assert root.tag.endswith("svg")
    ns = {"s": "http://www.w3.org/2000/svg"}
    titles = [t.text for t in root.findall(".//s:title", ns)]
    assert any(t.startswith("test_mlp") for t in titles)
    assert len(root.findall(".//s:rect", ns)) > 5


def test_trace_is_chrome_json(mlp_profile):
    data = json.loads(mlp_profile.trace_path.read_text())
    names = {e.get("name") for e in data["traceEvents"]}
    assert "test_mlp" in names
    assert mlp_profile.trace_path.parent.name == "traces"


def test_repr_and_html_say_what_was_counted(mlp_profile):
    text = repr(mlp_profile)
    assert "test_mlp" in text and "per call" in text
    assert "<table>" in mlp_profile._repr_html_()


def test_count_kernels_of_single_ops():
    x = torch.randn(300, 200, device=DEVICE)
    assert sum(count_kernels(torch.add, x, x).values()) == 1
    assert sum(count_kernels(torch.nn.functional.gelu, x).values()) == 1
    if DEVICE == "cpu":
        assert count_kernels(torch.softmax, x, -1) == {"aten::_softmax": 1}
        # a transpose is a view: no kernel
        assert count_kernels(torch.t, x) == {}
        # unfused tanh-GeLU written out in torch ops: one kernel per op
        unfused = lambda a: 0.5 * a * (1 + torch.tanh(0.79788456 * (a + 0.044715 * a**3)))
        assert sum(count_kernels(unfused, x).values()) == 8
        assert "aten::copy_" not in count_kernels(unfused, x)  # scalars wrapped by mul


def test_kernel_tiles_are_parsed_from_gemm_names():
    names = {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x256x32_warpgroupsize2x1x1_"
             "execute_segment_k_off_kernel__5x_cublas": 1,
             "ampere_sgemm_128x64_nn": 1,
             "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT": 1,  # seen on an H200, cuBLAS 13
             "void at::native::vectorized_elementwise_kernel<4, float>(int, float)": 1}
    tiles = dict(profiling.kernel_tiles(names))
    assert tiles[next(iter(names))] == "128x256x32"
    assert tiles["ampere_sgemm_128x64_nn"] == "128x64"
    assert tiles["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"] == "256x128_64x4"
    assert len(tiles) == 3


def test_short_name_drops_templates_and_parameters():
    assert profiling.short_name("void at::native::foo<4, at::native::Bar<float>>(int, float*)") \
        == "at::native::foo"


def test_not_callable_is_a_type_error_naming_fn():
    with pytest.raises(TypeError, match=r"fn=.*callable.*int"):
        profile(3, name="bad", show=False)
    with pytest.raises(TypeError, match="callable"):
        count_kernels("x")


def test_function_that_raises_is_named():
    def broken(x):
        raise IndexError("boom")

    with pytest.raises(RuntimeError, match=r"broken raised IndexError.*boom"):
        profile(broken, torch.ones(2), name="broken", show=False)
    with pytest.raises(RuntimeError, match=r"broken raised IndexError.*boom"):
        count_kernels(broken, torch.ones(2))


def test_bad_name_is_a_value_error():
    with pytest.raises(ValueError, match="name"):
        profile(torch.neg, torch.ones(2), name="", show=False)


def test_flamegraph_of_nothing_is_still_valid_svg():
    ET.fromstring(profiling.flamegraph_svg({}, title="empty <&>"))


def test_anonymous_namespaces_leave_no_empty_scopes():
    assert profiling.short_name("void (anonymous namespace)::softmax_warp_forward<float, 10>"
                                "(float*, int)") == "softmax_warp_forward"
    assert profiling.short_name("void at::native::(anonymous namespace)::CatArrayBatchedCopy<"
                                "int>(int*)") == "at::native::CatArrayBatchedCopy"


def test_kernels_sharing_a_short_name_get_distinct_labels():
    add = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
           " std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, "
           "std::array<char*, 3ul>)")
    mul = add.replace("CUDAFunctor_add", "MulFunctor")
    gemm = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
    labels = profiling.kernel_labels([add, mul, gemm])
    assert labels[gemm] == gemm
    assert labels[add] == ("vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, "
                           "std::array<char*, 3ul> >")
    assert "MulFunctor" in labels[mul]
    assert len(set(labels.values())) == 3
    assert len(profiling.kernel_detail(add * 3, width=40)) == 40


def test_backward_pass_kernels_are_counted():
    # on a GPU the autograd engine launches the backward kernels from its own thread
    x = torch.randn(256, 256, device=DEVICE)
    w = torch.randn(256, 256, device=DEVICE, requires_grad=True)

    def step():
        (x @ w).relu().sum().backward()

    counts = count_kernels(step)
    # forward: matmul, relu, sum; backward: ones, threshold_backward, matmul, grad accumulation
    assert sum(counts.values()) >= 6, counts
    p = profile(step, name="test_backward", show=False, reps=1)
    assert p.launches == sum(counts.values())
    assert read_folded(p.stacks_path)


def test_show_prints_summary_and_table_outside_jupyter(capsys):
    p = profile(torch.neg, torch.ones(64, device=DEVICE), name="test_show", reps=1, show=True)
    out = capsys.readouterr().out
    assert out.startswith("profile 'test_show'")
    assert p.table.strip() in out


def test_importing_profiling_leaves_inductor_unimported_but_its_kernels_profiled():
    # a notebook that profiles and never compiles should not pay for importing dynamo/inductor;
    # one that compiles later must still see inductor's C++ kernels in its profiles
    code = ("import sys\nfrom course_utils import profiling\n"
            "assert 'torch._dynamo' not in sys.modules and 'torch._inductor' not in sys.modules\n"
            "import torch._inductor.config as config\n"
            "assert config.cpp.enable_kernel_profile\nprint('ok')")
    child = env.child_environment()
    child.pop("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", None)  # (this process set it)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def _unreadable_stacks(monkeypatch, failures: int | None):
    """Make torch's reading of profiler events raise UnicodeDecodeError, as CPU-only torch
    2.13.0 does with with_stack=True: the first ``failures`` reads with stacks, or every one
    with stacks (None). Returns the list of with_stack flags of the reads."""
    parse = torch.autograd.profiler.profile._parse_kineto_results
    reads = []

    def flaky(self, *args, **kwargs):
        reads.append(self.with_stack)
        if self.with_stack and (failures is None or reads.count(True) <= failures):
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        return parse(self, *args, **kwargs)

    monkeypatch.setattr(torch.autograd.profiler.profile, "_parse_kineto_results", flaky)
    return reads


def test_profile_retries_when_torch_cannot_read_its_stacks(monkeypatch, capsys):
    reads = _unreadable_stacks(monkeypatch, failures=1)
    p = profile(torch.neg, torch.ones(64, device=DEVICE), name="test_retry", reps=1,
                show=False)
    assert reads == [True, True]  # the second profile, with stacks, was read
    assert p.kernels and capsys.readouterr().out == ""


def test_profile_falls_back_to_no_stacks_and_says_so(monkeypatch, capsys):
    reads = _unreadable_stacks(monkeypatch, failures=None)
    p = profile(torch.neg, torch.ones(64, device=DEVICE), name="test_no_stacks", reps=1,
                show=False)
    assert reads == [True] * profiling.profiler.STACK_ATTEMPTS + [False]
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "UnicodeDecodeError" in out
    assert "profiled without stacks" in out
    assert p.kernels and "test_no_stacks" in p.table  # the cell still gets its profile


def test_a_function_raising_unicode_decode_error_is_not_retried():
    def broken(x):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    with pytest.raises(RuntimeError, match="broken raised UnicodeDecodeError"):
        profile(broken, torch.ones(2), name="broken_decode", show=False, warmup=0)
