"""Solutions (and known-wrong answers) of lesson 08's exercises (05.feed, 05.native and
05.config before issue 24's split)."""

SOLUTIONS = {
    "mma_variants.native": '''
NATIVE = {
    "bf16":          {"sm_89": True,  "sm_90": True},
    "tf32":          {"sm_89": True,  "sm_90": True},
    "int8":          {"sm_89": True,  "sm_90": True},
    "int4":          {"sm_89": True,  "sm_90": False},
    "fp8_e4m3_e4m3": {"sm_89": True,  "sm_90": False},
}
''',
    "mma_variants.config": '''
import torch

MY_DEFINES = {
    "a_t": torch.bfloat16, "b_t": torch.bfloat16, "acc_t": "float", "out_t": torch.bfloat16,
    "INT4": False,
    "BM": 128, "BN": 128,
    "WM": 64, "WN": 64,
    "BK_BYTES": 128,
    "STAGES": 3,
    "GROUP_M": 8,
}
''',
}

WRONG = {
    # "sm_90 is newer, so everything sm_89 has is native there too"
    "mma_variants.native": '''
NATIVE = {
    "bf16":          {"sm_89": True,  "sm_90": True},
    "tf32":          {"sm_89": True,  "sm_90": True},
    "int8":          {"sm_89": True,  "sm_90": True},
    "int4":          {"sm_89": True,  "sm_90": True},
    "fp8_e4m3_e4m3": {"sm_89": True,  "sm_90": True},
}
''',
    # the default tiles with a fifth stage: 5 x 384 rows x 64 B = 122,880 B, over 99 KB
    "mma_variants.config": '''
import torch

MY_DEFINES = {
    "a_t": torch.bfloat16, "b_t": torch.bfloat16, "acc_t": "float", "out_t": torch.bfloat16,
    "INT4": False,
    "BM": 128, "BN": 256,
    "WM": 64, "WN": 64,
    "BK_BYTES": 64,
    "STAGES": 5,
    "GROUP_M": 8,
}
''',
}

SOLUTIONS["mma_variants.feed"] = '''
def ldmatrix_bytes_per_mma(wm, wn):
    mi, ni = wm // 16, wn // 8
    return (mi * 16 * 32 + ni * 8 * 32) / (mi * ni)
'''

# every mma loads its own two fragments: no reuse across the warp tile
WRONG["mma_variants.feed"] = '''
def ldmatrix_bytes_per_mma(wm, wn):
    return 16 * 32 + 8 * 32
'''
