"""course_utils.sass: SASS census and resources of NVRTC CUBINs, on any machine (no GPU)."""

import re
import subprocess

import pytest

from course_utils import nvrtc, requirements, sass

NO_NVRTC = nvrtc.unavailable_reason()
NO_DISASM = sass.unavailable_reason()
needs_nvrtc = pytest.mark.skipif(NO_NVRTC is not None, reason=f"NVRTC: {NO_NVRTC}")
needs_disasm = pytest.mark.skipif(NO_DISASM is not None, reason=str(NO_DISASM))

# One mma.sync and one ldmatrix, nothing else of note: the census must find both.
MMA_KERNEL = r"""
extern "C" __global__ void one_mma(const unsigned* a, float* c) {
    __shared__ unsigned s[256];
    s[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    unsigned r0, r1, r2, r3;
    unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(&s[(threadIdx.x % 16) * 4]));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
    float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(r0), "r"(r1), "r"(r2), "r"(r3), "r"(r0), "r"(r1));
    c[threadIdx.x * 4] = d0 + d1 + d2 + d3;
}
"""

# One fp8 mma: native (QMMA) on sm_89 and sm_120; on sm_90 ptxas emulates it.
FP8_KERNEL = r"""
extern "C" __global__ void fp8_mma(const unsigned* a, float* c) {
    const unsigned* p = a + threadIdx.x * 6;  // operands from memory: nothing to hoist
    float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "r"(p[4]), "r"(p[5]));
    c[threadIdx.x] = d0 + d1 + d2 + d3;
}
"""

# A per-thread array indexed at run time cannot live in registers: it goes to local memory.
LOCAL_KERNEL = r"""
extern "C" __global__ void local_array(const int* idx, float* out) {
    float table[64] = {};
    for (int i = 0; i < 64; ++i) table[idx[i] & 63] += out[i];  // addresses known at run time
    out[threadIdx.x] = table[idx[threadIdx.x] & 63];
}
"""


def _compile(source, name, arch):
    return nvrtc.compile(source, name, arch=arch, verbose=False)


# -- parsing (no tools needed) ----------------------------------------------------------------

CUOBJDUMP_TEXT = """
        Function : first
        /*0000*/                   LDC R1, c[0x0][0x28] ;            /* 0x00000a00ff017b82 */
        /*0110*/              @!P0 HMMA.16816.F32.BF16 R8, R8, R8, RZ ;
        /*0120*/                   STL.64 [R1], R2 ;
        /*0130*/                   LDL.128 R4, [R1] ;
        Function : second
        /*0000*/                   { IMMA.16832.S8.S8 R4, R8, R12, R4 ;
        /*0010*/                   F2FP.BF16.F32.PACK_AB R0, R1, R2 ;
        /*0020*/                   STL [R1+0x4], R0 ;
"""


def test_census_counts_opcodes_without_modifiers():
    counts = sass.census(CUOBJDUMP_TEXT)
    assert counts == {"LDC": 1, "HMMA": 1, "STL": 2, "LDL": 1, "IMMA": 1, "F2FP": 1}
    assert sass.variants(CUOBJDUMP_TEXT, "HMMA") == {"HMMA.16816.F32.BF16": 1}


def test_functions_split_both_tools_output():
    parts = sass.functions(CUOBJDUMP_TEXT)
    assert list(parts) == ["first", "second"]
    assert sass.census(parts["second"]) == {"IMMA": 1, "F2FP": 1, "STL": 1}
    nvdisasm_text = ('\t.section\t.text.k1,"ax",@progbits\n        /*0000*/   EXIT ;\n'
                     '\t.section\t.text.k2,"ax",@progbits\n        /*0000*/   BAR.SYNC 0x0 ;\n')
    assert {k: sass.census(v) for k, v in sass.functions(nvdisasm_text).items()} == {
        "k1": {"EXIT": 1}, "k2": {"BAR": 1}}


def test_local_traffic_counts_bytes_by_width():
    first = sass.functions(CUOBJDUMP_TEXT)["first"]
    assert sass.local_traffic(first) == (8, 16)  # STL.64 stores 8 bytes, LDL.128 loads 16


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="compiled expected a CUBIN"):
        sass.resources(b"not an elf file")
    with pytest.raises(ValueError, match="name expected"):
        sass.cuda_tool("nvdisasm; rm -rf /")


@needs_nvrtc
def test_ptx_is_refused_with_the_fix():
    ptx = nvrtc.compile(MMA_KERNEL, "one_mma", arch="sm_80", output="ptx", verbose=False)
    with pytest.raises(ValueError, match="output='cubin'"):
        sass.disassemble(ptx)


# -- tools and requirement ----------------------------------------------------------------------


def test_disasm_requirement_agrees_with_the_tool_lookup():
    assert (requirements.unmet("disasm") == []) == (sass.disassembler() is not None)


def test_without_any_tool_the_reason_says_what_to_install(monkeypatch):
    monkeypatch.setattr(sass, "cuda_tool", lambda name: None)
    assert "pip install nvidia-cuda-nvdisasm" in sass.unavailable_reason()
    assert requirements.unmet("disasm") == [sass.unavailable_reason()]


# -- real CUBINs ------------------------------------------------------------------------------


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_sync_bf16_is_one_hmma(arch):
    report = sass.report(_compile(MMA_KERNEL, "one_mma", arch))
    assert report.census["HMMA"] == 1 and report.census["LDSM"] == 1
    assert report.groups()["tensor core"] == {"HMMA": 1}
    assert report.resources.shared_bytes >= 1024  # 256 unsigned
    assert report.resources.spill_store_bytes == report.resources.spill_load_bytes == 0
    row = report.row()
    assert row["HMMA"] == 1 and row["arch"] == arch and row["registers"] > 0


@needs_nvrtc
@needs_disasm
@pytest.mark.parametrize("arch", ["sm_89", "sm_90", "sm_120"])
def test_fp8_mma_is_native_except_on_hopper(arch):
    if arch not in nvrtc.supported_archs():
        pytest.skip(f"NVRTC {nvrtc.version_string()} does not know {arch}")
    report = sass.report(_compile(FP8_KERNEL, "fp8_mma", arch))
    if arch == "sm_90":  # no fp8 mma.sync in Hopper's SM: unpack to f16 (F2FP), two HMMAs
        assert report.census["QMMA"] == 0
        assert report.census["HMMA"] == 2 and report.census["F2FP"] > 0
    else:
        assert sass.variants(report.sass, "QMMA") == {"QMMA.16832.F32.E4M3.E4M3": 1}
        assert report.census["HMMA"] == report.census["F2FP"] == 0


@needs_nvrtc
@needs_disasm
def test_many_reports_at_once_come_back_in_order_and_equal_one_at_a_time():
    programs = [_compile(MMA_KERNEL, "one_mma", "sm_80"), _compile(LOCAL_KERNEL, "local_array",
                                                                   "sm_90"),
                _compile(MMA_KERNEL, "one_mma", "sm_90")]
    assert sass.reports(programs) == [sass.report(p) for p in programs]
    assert [r.resources.kernel for r in sass.reports(programs)] == ["one_mma", "local_array",
                                                                    "one_mma"]
    assert sass.reports([]) == []


@needs_nvrtc
@needs_disasm
def test_local_array_shows_up_as_stack_and_local_traffic():
    report = sass.report(_compile(LOCAL_KERNEL, "local_array", "sm_90"))
    assert report.resources.stack_bytes >= 64 * 4
    assert report.census["STL"] > 0 and report.resources.spill_store_bytes > 0


@needs_nvrtc
@pytest.mark.skipif(sass.cuda_tool("cuobjdump") is None, reason="cuobjdump not found")
@pytest.mark.parametrize("source,name", [(MMA_KERNEL, "one_mma"),
                                         (LOCAL_KERNEL, "local_array")])
def test_resources_read_from_the_elf_match_cuobjdump(tmp_path, source, name):
    compiled = _compile(source, name, "sm_90")
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(compiled.binary)
    out = subprocess.run([sass.cuda_tool("cuobjdump"), "--dump-resource-usage", str(cubin)],
                         capture_output=True, text=True, check=True).stdout
    fields = dict(re.findall(r"\b(REG|STACK|SHARED):(\d+)", out))
    (res,) = sass.resources(compiled)
    assert res.kernel == name
    assert (res.registers, res.stack_bytes, res.shared_bytes) == (
        int(fields["REG"]), int(fields["STACK"]), int(fields["SHARED"]))


@needs_nvrtc
@pytest.mark.skipif(not (sass.cuda_tool("nvdisasm") and sass.cuda_tool("cuobjdump")),
                    reason="needs both nvdisasm and cuobjdump")
def test_both_disassemblers_give_the_same_census(monkeypatch):
    compiled = _compile(MMA_KERNEL, "one_mma", "sm_90")
    counts = {}
    for tool in sass.TOOLS:
        monkeypatch.setattr(sass, "TOOLS", (tool,))
        counts[tool] = sass.report(compiled).census
    assert counts["nvdisasm"] == counts["cuobjdump"]
