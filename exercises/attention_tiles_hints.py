"""The hints of exercise attention_variants.flash_tiles: what to look at, by what the check found
wrong (:mod:`exercises.attention_tiles_checks` gives them with its verdicts)."""

FORWARD = ("compare one tile by hand: S = q_tile k_tileᵀ / √D, the running max m (from −∞), "
           "α = exp(m_old − m_new), l = α·l + rowsum(P), acc = α·acc + P v_tile; "
           "out = acc / l at the end")
RESCALE = ("right with one tile of keys, wrong with several: each time the running maximum "
           "grows, what was summed so far must be rescaled by alpha = exp(m_old − m_new), the "
           "accumulator acc as well as the sum l")
FLOAT32 = ("right in float32, wrong in 16 bits: compute in float32 (q.float(), k.float(), "
           "v.float()): the scores, m, l and acc; round only the output to q's dtype")
EMPTY = ("a row that sees no key (Sk = 0) has l = 0 and acc = 0: its output is 0 (divide by "
         "torch.where(l == 0, 1, l)), never 0 / 0")
NEGATIVE = ("every score of this problem is about −200: a running maximum started at 0 (not "
            "−∞) stays 0, and exp(s − 0) underflows to 0 in float32 (l = 0, L = −∞); start m at "
            "−∞ and guard only what you subtract while nothing has been seen")
LARGE = ("the scores reach several hundred: exp(s) overflows float32 past 88; subtract the "
         "running maximum inside every exp (exp(s − m_new), exp(m_old − m_new))")
CAUSAL = ("causal: query i sees key j when j <= i (top-left, as the course's kernels and SDPA's "
          "is_causal): the diagonal included, whatever Sq and Sk")
SAVE_L = ("save L = m + log(l) per query, shape (B, H, Sq), float32, with "
          "ctx.save_for_backward(q, k, v, out, L)")
TILED = ("walk the keys in tiles of BLOCK_K as well as the queries in tiles of BLOCK_Q: each "
         "step holds a (BLOCK_Q, BLOCK_K) block of scores per (batch, head), never a row of "
         "every key, and a mask made from the tile's own indices")
RAGGED = ("range(0, S, BLOCK) reaches the last, ragged tile, and a slice past the end "
          "(k[:, :, j0:j0 + BLOCK_K]) just holds fewer rows: take the tile's length from the "
          "slice, never BLOCK itself")
SCALE = "the scores are q kᵀ · scale with scale = 1/√D (D = q.shape[-1])"
BATCH_HEAD = ("keep the (batch, head) dimensions as they are and let each op broadcast over "
              "them; or, in a loop, index the pair the same way when you read and when you "
              "write (a flat index of B·H pairs is b·H + h)")
DV = ("dV = Pᵀ dO is wrong, so P is: recompute each tile's S = q kᵀ · scale (the forward's "
      "1/√D) and P = exp(S − L) with the L you saved, masked exactly as the forward masks")
DS = ("dV is right, so P is; dS is not: dP = dO Vᵀ, dS = P ∘ (dP − D) with D_i = rowsum(dO ∘ O) "
      "over the whole row (dO and the saved output, one number per query), not a tile's share")
DK = "dV and dQ are right, dK is not: dK += dSᵀ Q · scale (dS transposed, Q of the query tile)"
DQ = "dV and dK are right, dQ is not: dQ += dS K · scale (K of the key tile)"
RETURNS = ("backward returns one gradient per input of forward: (dq, dk, dv, None), each of "
           "its input's shape and dtype (dq.to(q.dtype))")
NOT_CONTIGUOUS = ("a view (.view) needs contiguous memory; dO comes as autograd hands it: use "
                  ".reshape or .contiguous(), or index it as it is")
BACKWARD_AGAIN = ("the backward has what it needs in L: P = exp(S − L) is exact, so it needs no "
                  "maximum, sum or softmax over a row, and never the forward again")

