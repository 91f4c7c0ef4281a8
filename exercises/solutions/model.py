"""Solutions (and known-wrong answers) of lesson 12's exercises."""

from exercises.solutions import rmsnorm

_SWAP = '''
import torch


def rmsnorm_backward(dy, x, weight, rstd):
    acc = torch.promote_types(x.dtype, torch.float32)
    r = rstd.to(acc)[:, None]
    x_hat = x.to(acc) * r
    g = dy.to(acc) * weight.to(acc)
    dx = r * (g - x_hat * (g * x_hat).mean(dim=1, keepdim=True))
    dweight = (dy.to(acc) * x_hat).sum(dim=0)
    return dx.to(x.dtype), dweight.to(weight.dtype)
'''

_PREDICT = '''
def attention_share(d_model, n_layers, seq, vocab):
    linear = 2 * d_model * 3 * d_model + 2 * d_model * d_model + 2 * 2 * d_model * 4 * d_model
    attention = 2 * seq * d_model + 2 * seq * d_model
    total = n_layers * (linear + attention) + 2 * d_model * vocab
    return n_layers * attention / total
'''

SOLUTIONS = {"model.swap": _SWAP, "model.predict": _PREDICT}
# lesson 10's answer (exercise rmsnorm.backward) works here as it is: its wrong answers too
_RMSNORM_WRONG = rmsnorm.WRONG["rmsnorm.backward"]


def _edit(source: str, old: str, new: str) -> str:
    if old not in source:
        raise ValueError(f"{old!r} is not in the solution")
    return source.replace(old, new)


WRONG = {
    "model.swap": {
        # dx = rstd · g: the path through rstd (every x of the row feeds each dx) forgotten
        "no correction term": _edit(_SWAP, "dx = r * (g - x_hat * (g * x_hat).mean(dim=1, "
                                    "keepdim=True))", "dx = r * g"),
        # a gradient off by a factor: dweight averaged over the rows instead of summed
        "dweight averaged": _edit(_SWAP, "(dy.to(acc) * x_hat).sum(dim=0)",
                                  "(dy.to(acc) * x_hat).mean(dim=0)"),
        # dweight without the normalised x
        "dweight of dy only": _edit(_SWAP, "(dy.to(acc) * x_hat).sum(dim=0)",
                                    "dy.to(acc).sum(dim=0)"),
        # g without the weight
        "weight forgotten": _edit(_SWAP, "g = dy.to(acc) * weight.to(acc)", "g = dy.to(acc)"),
        # the mean over the rows instead of the row
        "mean over the wrong dim": _edit(_SWAP, "(g * x_hat).mean(dim=1, keepdim=True)",
                                         "(g * x_hat).mean(dim=0, keepdim=True)"),
        # the two gradients in the wrong order
        "swapped": _edit(_SWAP, "return dx.to(x.dtype), dweight.to(weight.dtype)",
                         "return dweight.to(weight.dtype), dx.to(x.dtype)"),
        # each chunk of 1024 rows summed in float32, the chunks added in weight's dtype: in
        # bfloat16 every addition rounds the running sum to 8 bits
        "dweight added up in bf16 by chunks of 1024 rows": _edit(
            _SWAP, "    dweight = (dy.to(acc) * x_hat).sum(dim=0)\n",
            "    dweight = torch.zeros_like(weight)\n"
            "    for start in range(0, x.shape[0], 1024):\n"
            "        chunk = (dy[start:start + 1024].to(acc) * x_hat[start:start + 1024]).sum(0)\n"
            "        dweight += chunk.to(weight.dtype)\n"),
        # lesson 10's Triton backward with every program adding its part of dweight into one
        # zeroed row with tl.atomic_add: right values, but their last bits follow the order in
        # which the programs finish
        "Triton, dweight by tl.atomic_add": _edit(
            _RMSNORM_WRONG["atomics"], "partial = torch.empty((programs, cols)",
            "partial = torch.zeros((programs, cols)"),
    },
    "model.predict": {
        "causal halves attention": _edit(_PREDICT, "attention = 2 * seq * d_model + 2 * seq * "
                                         "d_model", "attention = seq * d_model + seq * d_model"),
        "P V forgotten": _edit(_PREDICT, "attention = 2 * seq * d_model + 2 * seq * d_model",
                               "attention = 2 * seq * d_model"),
        "head forgotten": _edit(_PREDICT, " + 2 * d_model * vocab", ""),
        "output projection forgotten": _edit(_PREDICT, " + 2 * d_model * d_model + ", " + "),
        "MLP of width d": _edit(_PREDICT, "2 * 2 * d_model * 4 * d_model",
                                "2 * 2 * d_model * d_model"),
        "a constant": "\ndef attention_share(d_model, n_layers, seq, vocab):\n    return 0.1\n",
    },
}

