"""Solutions (and known-wrong answers) of lesson 05's exercises."""

SOLUTIONS = {
    "05.swizzle": '''
def swizzled_offset(row, chunk, row_bytes):
    chunks = row_bytes // 16
    return row * row_bytes + ((chunk ^ ((row // (8 // chunks)) % chunks)) << 4)
''',
    "05.native": '''
NATIVE = {
    "bf16":          {"sm_89": True,  "sm_90": True},
    "tf32":          {"sm_89": True,  "sm_90": True},
    "int8":          {"sm_89": True,  "sm_90": True},
    "int4":          {"sm_89": True,  "sm_90": False},
    "fp8_e4m3_e4m3": {"sm_89": True,  "sm_90": False},
}
''',
    "05.config": '''
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
    # XOR with row % chunks: right for 128-byte rows, a 2-way conflict for 64-byte rows, where
    # two consecutive rows already sit in different halves of the 8 bank groups
    "05.swizzle": '''
def swizzled_offset(row, chunk, row_bytes):
    chunks = row_bytes // 16
    return row * row_bytes + ((chunk ^ (row % chunks)) << 4)
''',
    # "sm_90 is newer, so everything sm_89 has is native there too"
    "05.native": '''
NATIVE = {
    "bf16":          {"sm_89": True,  "sm_90": True},
    "tf32":          {"sm_89": True,  "sm_90": True},
    "int8":          {"sm_89": True,  "sm_90": True},
    "int4":          {"sm_89": True,  "sm_90": True},
    "fp8_e4m3_e4m3": {"sm_89": True,  "sm_90": True},
}
''',
    # the default tiles with a fifth stage: 5 x 384 rows x 64 B = 122,880 B, over 99 KB
    "05.config": '''
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

SOLUTIONS["05.feed"] = '''
def ldmatrix_bytes_per_mma(wm, wn):
    mi, ni = wm // 16, wn // 8
    return (mi * 16 * 32 + ni * 8 * 32) / (mi * ni)
'''

# every mma loads its own two fragments: no reuse across the warp tile
WRONG["05.feed"] = '''
def ldmatrix_bytes_per_mma(wm, wn):
    return 16 * 32 + 8 * 32
'''
