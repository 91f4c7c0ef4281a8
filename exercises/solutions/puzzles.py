"""Solutions (and known-wrong answers) of lesson 03, the Triton puzzle ladder."""

_HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"

SOLUTIONS = {
    "puzzles.add": _HEAD + '''def add_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    offsets = tl.arange(0, B0)
    tl.store(z_ptr + offsets, tl.load(x_ptr + offsets) + 10)
''',
    "puzzles.add_blocks": _HEAD + '''def add_blocks_kernel(x_ptr, z_ptr, N0, B0: tl.constexpr):
    offsets = tl.program_id(0) * B0 + tl.arange(0, B0)
    mask = offsets < N0
    tl.store(z_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 10, mask=mask)
''',
    "puzzles.outer": _HEAD + '''def outer_kernel(x_ptr, y_ptr, z_ptr, N0, N1, B0: tl.constexpr,
                 B1: tl.constexpr):
    i = tl.arange(0, B0)
    j = tl.arange(0, B1)
    z = tl.load(y_ptr + j)[:, None] + tl.load(x_ptr + i)[None, :]
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], z)
''',
    "puzzles.outer_blocks": _HEAD + '''def outer_blocks_kernel(x_ptr, y_ptr, z_ptr, N0, N1,
                        B0: tl.constexpr, B1: tl.constexpr):
    i = tl.program_id(0) * B0 + tl.arange(0, B0)
    j = tl.program_id(1) * B1 + tl.arange(0, B1)
    x = tl.load(x_ptr + i, mask=i < N0)
    y = tl.load(y_ptr + j, mask=j < N1)
    z = tl.maximum(y[:, None] * x[None, :], 0.0)
    tl.store(z_ptr + j[:, None] * N0 + i[None, :], z, mask=(j < N1)[:, None] & (i < N0)[None, :])
''',
    "puzzles.row_sum": _HEAD + '''def row_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr,
                   BT: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    cols = tl.arange(0, BT)
    mask = (rows < N0)[:, None] & (cols < T)[None, :]
    x = tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=mask, other=0.0)
    tl.store(z_ptr + rows, tl.sum(x, axis=1), mask=rows < N0)
''',
    "puzzles.long_sum": _HEAD + '''def long_sum_kernel(x_ptr, z_ptr, N0, T, B0: tl.constexpr,
                    BT: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for t0 in range(0, T, BT):
        cols = t0 + tl.arange(0, BT)
        mask = (rows < N0)[:, None] & (cols < T)[None, :]
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * T + cols[None, :], mask=mask, other=0.0),
                      axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
    "puzzles.col_sum": _HEAD + '''def col_sum_kernel(x_ptr, z_ptr, N0, N1, B0: tl.constexpr,
                   B1: tl.constexpr):
    cols = tl.program_id(0) * B1 + tl.arange(0, B1)
    acc = tl.zeros((B1,), dtype=tl.float32)
    for r0 in range(0, N0, B0):
        rows = r0 + tl.arange(0, B0)
        mask = (rows < N0)[:, None] & (cols < N1)[None, :]
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * N1 + cols[None, :], mask=mask, other=0.0),
                      axis=0)
    tl.store(z_ptr + cols, acc, mask=cols < N1)
''',
    "puzzles.softmax": _HEAD + '''def softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BT)
    x = tl.load(x_ptr + row * T + cols, mask=cols < T, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(z_ptr + row * T + cols, e / tl.sum(e, axis=0), mask=cols < T)
''',
    "puzzles.long_softmax":
        _HEAD + '''def long_softmax_kernel(x_ptr, z_ptr, N0, T, BT: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    s = 0.0
    for t0 in range(0, T, BT):
        cols = t0 + tl.arange(0, BT)
        x = tl.load(x_ptr + row * T + cols, mask=cols < T, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for t0 in range(0, T, BT):
        cols = t0 + tl.arange(0, BT)
        x = tl.load(x_ptr + row * T + cols, mask=cols < T, other=-float("inf"))
        tl.store(z_ptr + row * T + cols, tl.exp(x - m) / s, mask=cols < T)
''',
    "puzzles.matvec": _HEAD + '''def matvec_kernel(a_ptr, x_ptr, z_ptr, N0, N1, B0: tl.constexpr,
                  B1: tl.constexpr):
    rows = tl.program_id(0) * B0 + tl.arange(0, B0)
    acc = tl.zeros((B0,), dtype=tl.float32)
    for c0 in range(0, N1, B1):
        cols = c0 + tl.arange(0, B1)
        a = tl.load(a_ptr + rows[:, None] * N1 + cols[None, :],
                    mask=(rows < N0)[:, None] & (cols < N1)[None, :], other=0.0)
        x = tl.load(x_ptr + cols, mask=cols < N1, other=0.0)
        acc += tl.sum(a * x[None, :], axis=1)
    tl.store(z_ptr + rows, acc, mask=rows < N0)
''',
    "puzzles.dot": _HEAD + '''def dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :],
                    mask=(rows < M)[:, None] & (ks < K)[None, :], other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :],
                    mask=(ks < K)[:, None] & (cols < N)[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc,
             mask=(rows < M)[:, None] & (cols < N)[None, :])
''',
    "puzzles.attention": _HEAD + '''def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S,
                     BS: tl.constexpr, D: tl.constexpr):
    rows = tl.arange(0, BS)
    dims = tl.arange(0, D)
    at = rows[:, None] * D + dims[None, :]
    inside = (rows < S)[:, None]
    q = tl.load(q_ptr + at, mask=inside, other=0.0)
    k = tl.load(k_ptr + at, mask=inside, other=0.0)
    v = tl.load(v_ptr + at, mask=inside, other=0.0)
    scores = tl.dot(q, tl.trans(k)) / tl.sqrt(D * 1.0)
    scores = tl.where((rows < S)[None, :], scores, -float("inf"))  # keys past S: weight 0
    p = tl.exp(scores - tl.max(scores, axis=1)[:, None])
    p = p / tl.sum(p, axis=1)[:, None]
    tl.store(o_ptr + at, tl.dot(p, v), mask=inside)
''',
}


# the head of long_softmax's second loop (the one that stores)
_SECOND_PASS = ("    for t0 in range(0, T, BT):\n        cols = t0 + tl.arange(0, BT)\n        x = "
                "tl.load(x_ptr + row * T + cols, mask=cols < T, other=-float(\"inf\"))\n"
                "        tl.store")


def _edit(id: str, old: str, new: str) -> str:
    source = SOLUTIONS[id]
    if old not in source:
        raise ValueError(f"{id}: {old!r} is not in the solution")
    return source.replace(old, new)


WRONG = {
    "puzzles.add": {
        # PyTorch, not a kernel
        "plain PyTorch": "def add_kernel(x_ptr, z_ptr, N0, B0=32):\n    z_ptr.copy_(x_ptr + 10)\n",
        # x copied: the + 10 forgotten
        "a copy": _edit("puzzles.add", "tl.load(x_ptr + offsets) + 10", "tl.load(x_ptr + offsets)"),
        # half a block of lanes: the second half of z never written
        "half the lanes": _edit("puzzles.add", "tl.arange(0, B0)", "tl.arange(0, B0 // 2)"),
        # the docstring's "+ 10" read as "* 10"
        "times ten": _edit("puzzles.add", ") + 10)", ") * 10)"),
        # the lanes one element along: the last lane reads and writes one past the end
        "shifted by one": _edit("puzzles.add", "offsets = tl.arange(0, B0)",
                                "offsets = tl.arange(0, B0) + 1"),
    },
    "puzzles.add_blocks": {
        # program p starts at element p, not at p * B0: the blocks overlap, the end is never
        # reached
        "blocks one apart": _edit("puzzles.add_blocks", "tl.program_id(0) * B0",
                                  "tl.program_id(0)"),
        # no mask on the load: the last program's extra lanes read past x (values masked at
        # the store, so z is right)
        "unmasked load": _edit("puzzles.add_blocks", "tl.load(x_ptr + offsets, mask=mask)",
                               "tl.load(x_ptr + offsets)"),
        # no mask on the store: the last program writes past the end of z
        "unmasked store": _edit("puzzles.add_blocks", "+ 10, mask=mask)", "+ 10)"),
        # every program does block 0
        "no program id": _edit("puzzles.add_blocks", "tl.program_id(0) * B0 + ", ""),
        # offsets < N0 - 1: the last element never written
        "mask one short": _edit("puzzles.add_blocks", "offsets < N0", "offsets < N0 - 1"),
    },
    "puzzles.outer": {
        # y's block loaded from x
        "y from x": _edit("puzzles.outer", "tl.load(y_ptr + j)", "tl.load(x_ptr + j)"),
        # rows N1 apart instead of N0: the rows of z overlap (and some are never written)
        "row stride N1": _edit("puzzles.outer", "j[:, None] * N0 + i[None, :]",
                               "j[:, None] * N1 + i[None, :]"),
        # a product where a sum is asked
        "a product": _edit("puzzles.outer", "[:, None] + tl.load", "[:, None] * tl.load"),
        # z[i, j] instead of z[j, i]: rows and columns swapped (wrong unless N0 = N1)
        "transposed store": _edit("puzzles.outer", "j[:, None] * N0 + i[None, :]",
                                  "i[None, :] * N1 + j[:, None]"),
        # x broadcast along the wrong axis: a B0 x B0 block where B1 x B0 is asked
        "x as a column": _edit("puzzles.outer", "tl.load(x_ptr + i)[None, :]",
                               "tl.load(x_ptr + i)[:, None]"),
    },
    "puzzles.outer_blocks": {
        # the two program ids swapped: x's tiles follow the grid's second axis
        "program ids swapped": _edit("puzzles.outer_blocks", "i = tl.program_id(0) * B0",
                                     "i = tl.program_id(1) * B0").replace(
            "j = tl.program_id(1) * B1", "j = tl.program_id(0) * B1"),
        # only the rows masked on the store: the last column block writes past each row
        "mask on rows only": _edit("puzzles.outer_blocks",
                                   "mask=(j < N1)[:, None] & (i < N0)[None, :])",
                                   "mask=(j < N1)[:, None])"),
        # unmasked loads of x and y past their ends
        "unmasked loads": _edit("puzzles.outer_blocks", "tl.load(x_ptr + i, mask=i < N0)",
                                "tl.load(x_ptr + i)").replace(
            "tl.load(y_ptr + j, mask=j < N1)", "tl.load(y_ptr + j)"),
        # both program ids along x: the tiles of y never change
        "one program id": _edit("puzzles.outer_blocks", "tl.program_id(1) * B1",
                                "tl.program_id(0) * B1"),
        # no relu
        "no relu": _edit("puzzles.outer_blocks", "tl.maximum(y[:, None] * x[None, :], 0.0)",
                         "y[:, None] * x[None, :]"),
    },
    "puzzles.row_sum": {
        # the store unmasked: the last program's rows past N0 write past the end of z
        "store unmasked": _edit("puzzles.row_sum", "tl.sum(x, axis=1), mask=rows < N0)",
                                "tl.sum(x, axis=1))"),
        # the columns not masked: a row's block runs into the next row (and past x)
        "columns unmasked": _edit("puzzles.row_sum", "(rows < N0)[:, None] & (cols < T)[None, :]",
                                  "(rows < N0)[:, None]"),
        # the sum along the wrong axis: B0 column sums... of a BT-wide block
        "wrong axis": _edit("puzzles.row_sum", "tl.sum(x, axis=1), mask=rows < N0",
                            "tl.sum(x, axis=0), mask=cols < N0"),
        # no other=: the masked-off lanes are undefined and join the sum
        "no other": _edit("puzzles.row_sum", "mask=mask, other=0.0)", "mask=mask)"),
        # the rows' stride taken as BT (the block) instead of T (the row length)
        "stride of the block": _edit("puzzles.row_sum", "rows[:, None] * T", "rows[:, None] * BT"),
    },
    "puzzles.long_sum": {
        # the store unmasked: rows past N0 written past the end of z
        "store unmasked": _edit("puzzles.long_sum", "tl.store(z_ptr + rows, acc, mask=rows < N0)",
                                "tl.store(z_ptr + rows, acc)"),
        # the chunk's offset forgotten: the first chunk summed again and again
        "chunk offset forgotten": _edit("puzzles.long_sum", "cols = t0 + tl.arange(0, BT)",
                                        "cols = tl.arange(0, BT)"),
        # the accumulator reset inside the loop: only the last chunk is summed
        "last chunk only": _edit("puzzles.long_sum", "        acc += tl.sum(",
                                 "        acc = tl.sum("),
        # the loop stops a chunk early when T is not a multiple of BT
        "floor of the chunks": _edit("puzzles.long_sum", "range(0, T, BT)",
                                     "range(0, T - BT + 1, BT)"),
        # columns not masked: a chunk past T reads into the next row (and past x)
        "columns unmasked": _edit("puzzles.long_sum", "(rows < N0)[:, None] & (cols < T)[None, :]",
                                  "(rows < N0)[:, None]"),
    },
    "puzzles.col_sum": {
        # the store unmasked: the last program's columns past N1 written past z
        "store unmasked": _edit("puzzles.col_sum", "tl.store(z_ptr + cols, acc, mask=cols < N1)",
                                "tl.store(z_ptr + cols, acc)"),
        # every program on the first B1 columns: the others never written
        "no program id": _edit("puzzles.col_sum", "cols = tl.program_id(0) * B1 + tl.arange(0, B1)",
                               "cols = tl.arange(0, B1)"),
        # reduced along axis 1: sums of rows of the block, not columns
        "wrong axis": _edit("puzzles.col_sum", "axis=0)", "axis=1)"),
        # the row index of the block forgets r0: the first B0 rows again and again
        "rows forget r0": _edit("puzzles.col_sum", "rows = r0 + tl.arange(0, B0)",
                                "rows = tl.arange(0, B0)"),
        # the rows' stride is N0 (the number of rows) instead of N1
        "stride N0": _edit("puzzles.col_sum", "rows[:, None] * N1", "rows[:, None] * N0"),
    },
    "puzzles.softmax": {
        # no max subtracted: exp overflows to inf for values of a few hundred (inf / inf = NaN)
        "no max subtracted": _edit("puzzles.softmax", "tl.exp(x - tl.max(x, axis=0))", "tl.exp(x)"),
        # rows BT apart instead of T
        "row stride BT": _edit("puzzles.softmax", "x_ptr + row * T", "x_ptr + row * BT"),
        # padding with 0.0: exp(0 - max) joins the sum of a short row
        "padded with zero": _edit("puzzles.softmax", "other=-float(\"inf\")", "other=0.0"),
        # the store unmasked: the last row writes past the end of z
        "no store mask": _edit("puzzles.softmax", "e / tl.sum(e, axis=0), mask=cols < T)",
                               "e / tl.sum(e, axis=0))"),
        "divided by the max": _edit("puzzles.softmax", "e / tl.sum(e, axis=0)",
                                    "e / tl.max(e, axis=0)"),
        # the row loaded with 0.0 past T, the padding masked only after the maximum: a row of
        # negative values gets the maximum 0, and every exp(x - 0) underflows
        "padding 0 in the maximum": _edit(
            "puzzles.softmax", "other=-float(\"inf\"))\n    e = tl.exp(x - tl.max(x, axis=0))",
            "other=0.0)\n    e = tl.where(cols < T, tl.exp(x - tl.max(x, axis=0)), 0.0)"),
        # the maximum clamped at 0 (a guard against -inf that also moves a negative maximum)
        "maximum clamped at 0": _edit("puzzles.softmax", "tl.exp(x - tl.max(x, axis=0))",
                                      "tl.exp(x - tl.maximum(tl.max(x, axis=0), 0.0))"),
    },
    "puzzles.long_softmax": {
        # the second pass forgets the max: exp(x) overflows for large values
        "max forgotten when storing": _edit("puzzles.long_softmax", "tl.exp(x - m) / s",
                                            "tl.exp(x) / s"),
        # the second pass only over the first chunk: the rest of the row never written
        "one chunk stored": _edit("puzzles.long_softmax", _SECOND_PASS,
                                  _SECOND_PASS.replace("range(0, T, BT)", "range(0, BT, BT)")),
        # the running sum not rescaled when the max grows
        "sum not rescaled": _edit("puzzles.long_softmax", "s = s * tl.exp(m - m_new) + ",
                                  "s = s + "),
        # the second pass uses the last chunk's max only
        "max of the last chunk": _edit("puzzles.long_softmax", "        m = m_new\n",
                                       "        m = tl.max(x, axis=0)\n"),
        # the second pass's store unmasked: writes past the row (and past z)
        "store unmasked": _edit("puzzles.long_softmax", "tl.exp(x - m) / s, mask=cols < T)",
                                "tl.exp(x - m) / s)"),
        # the running maximum started at 0, not -inf: right while some value is positive
        "running max started at 0": _edit("puzzles.long_softmax", '    m = -float("inf")\n',
                                          "    m = 0.0\n"),
        # the chunks loaded with 0.0 past T for the maximum, the sum masked instead: the last
        # chunk's padding puts 0 into the running maximum
        "padding 0 in the maximum": _edit(
            "puzzles.long_softmax",
            "        x = tl.load(x_ptr + row * T + cols, mask=cols < T, other=-float(\"inf\"))\n"
            "        m_new = tl.maximum(m, tl.max(x, axis=0))\n"
            "        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)",
            "        x = tl.load(x_ptr + row * T + cols, mask=cols < T, other=0.0)\n"
            "        m_new = tl.maximum(m, tl.max(x, axis=0))\n"
            "        s = s * tl.exp(m - m_new) + tl.sum(tl.where(cols < T, tl.exp(x - m_new), "
            "0.0), axis=0)"),
    },
    "puzzles.matvec": {
        # the store unmasked: rows past N0 written past z
        "store unmasked": _edit("puzzles.matvec", "tl.store(z_ptr + rows, acc, mask=rows < N0)",
                                "tl.store(z_ptr + rows, acc)"),
        # the accumulator reset every step: the last columns only
        "last step only": _edit("puzzles.matvec", "acc += tl.sum(", "acc = tl.sum("),
        # x loaded without its mask: a read past the end of x
        "x unmasked": _edit("puzzles.matvec", "tl.load(x_ptr + cols, mask=cols < N1, other=0.0)",
                            "tl.load(x_ptr + cols)"),
        # the product summed along axis 0
        "wrong axis": _edit("puzzles.matvec", "axis=1)", "axis=0)"),
        # a transposed: a[c, r]
        "a transposed": _edit("puzzles.matvec", "rows[:, None] * N1 + cols[None, :]",
                              "cols[None, :] * N0 + rows[:, None]"),
    },
    "puzzles.dot": {
        # the store unmasked: the edge tiles write past the rows and the end of c
        "store unmasked": _edit("puzzles.dot", "acc,\n             mask=(rows < M)[:, None] & "
                                "(cols < N)[None, :])", "acc)"),
        # no other= on the K slices: undefined lanes past K join the product
        "no other on a": _edit("puzzles.dot", "& (ks < K)[None, :], other=0.0)",
                               "& (ks < K)[None, :])"),
        # the K mask dropped from b: a read past the end of b in the last K step
        "b's K unmasked": _edit("puzzles.dot", "mask=(ks < K)[:, None] & (cols < N)[None, :]",
                                "mask=(cols < N)[None, :]"),
        # acc replaced by each step's product: the last K step only
        "last step only": _edit("puzzles.dot", "acc = tl.dot(a, b, acc)", "acc = tl.dot(a, b)"),
        # b's stride taken as K
        "b's stride K": _edit("puzzles.dot", "ks[:, None] * N + cols", "ks[:, None] * K + cols"),
    },
    "puzzles.attention": {
        # no max subtracted: exp of large scores overflows (inf / inf = NaN)
        "no max subtracted": _edit("puzzles.attention", "tl.exp(scores - tl.max(scores, axis=1)"
                                   "[:, None])", "tl.exp(scores)"),
        # padded keys not masked: exp(0 - max) of the zero keys joins every row's sum
        "padded keys kept": _edit("puzzles.attention",
                                  "    scores = tl.where((rows < S)[None, :], scores, "
                                  "-float(\"inf\"))  # keys past S: weight 0\n", ""),
        # no 1/sqrt(D) scale
        "unscaled": _edit("puzzles.attention", " / tl.sqrt(D * 1.0)", ""),
        # softmax over the queries (axis 0) instead of the keys
        "softmax over queries": _edit("puzzles.attention", "tl.max(scores, axis=1)[:, None]",
                                      "tl.max(scores, axis=0)[None, :]").replace(
            "tl.sum(p, axis=1)[:, None]", "tl.sum(p, axis=0)[None, :]"),
        # q, k, v loads unmasked: reads past the end of each when S < BS
        "loads unmasked": _edit("puzzles.attention", "mask=inside, other=0.0)", ")"),
        # the maximum taken before the padded keys are set to -inf: their scores (0, from the
        # zero rows of k) join it, and a row of negative scores gets the maximum 0
        "padding 0 in the maximum": _edit(
            "puzzles.attention",
            "    scores = tl.where((rows < S)[None, :], scores, -float(\"inf\"))  # keys past S: "
            "weight 0\n    p = tl.exp(scores - tl.max(scores, axis=1)[:, None])",
            "    m = tl.max(scores, axis=1)\n"
            "    scores = tl.where((rows < S)[None, :], scores, -float(\"inf\"))\n"
            "    p = tl.exp(scores - m[:, None])"),
        # the maximum clamped at 0 (a guard against -inf that also moves a negative maximum)
        "maximum clamped at 0": _edit("puzzles.attention", "tl.max(scores, axis=1)[:, None]",
                                      "tl.maximum(tl.max(scores, axis=1), 0.0)[:, None]"),
    },
}

# mechanical mutants (exercises/mutants.py) that behave exactly like the solution
EQUIVALENT = {
    "puzzles.long_softmax": {
        'mask dropped: line 18: x = tl.load(x_ptr + row * T + cols, mask=cols < T, '
        'other=-float("inf"))  ->  x = tl.load(x_ptr + row * T + cols, mask=cols < T)':
            "the second pass's masked-off lanes are never stored (the store has the same "
            "mask): their undefined values reach no output",
    },
    "puzzles.attention": {
        "mask dropped: line 12: q = tl.load(q_ptr + at, mask=inside, other=0.0)  ->  "
        "q = tl.load(q_ptr + at, mask=inside)":
            "a query row past S only makes its own row of scores, p and o, and that row is "
            "not stored",
        "mask dropped: line 13: k = tl.load(k_ptr + at, mask=inside, other=0.0)  ->  "
        "k = tl.load(k_ptr + at, mask=inside)":
            "a key row past S only makes its own column of scores, which tl.where replaces "
            "with -inf whatever it held",
    },
}
