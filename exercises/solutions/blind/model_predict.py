"""Wrong answers to exercise model.predict, written from its statement and stub alone (see
:mod:`exercises.solutions.blind`)."""

# ruff: noqa: E501

ID = "model.predict"
BLIND: dict[str, str] = {
        "the head (d -> vocab) left out of the total": r'''
# ✏️ Exercise model.predict: edit this cell, run it, then run the check below
def attention_share(d_model, n_layers, seq, vocab):
    """The share of one forward's matmul FLOPs that attention's two S x S matmuls take."""
    d, s = d_model, seq
    attention = 2 * (2 * s * s * d)                       # Q K^T and P V over every head
    projections = 2 * s * d * 3 * d + 2 * s * d * d       # q, k, v and out
    mlp = 2 * s * d * 4 * d + 2 * s * 4 * d * d           # d -> 4d -> d
    per_layer = attention + projections + mlp
    return n_layers * attention / (n_layers * per_layer)
''',
        "causal attention counted as half the S x S products": r'''
# ✏️ Exercise model.predict: edit this cell, run it, then run the check below
def attention_share(d_model, n_layers, seq, vocab):
    """The share of one forward's matmul FLOPs that attention's two S x S matmuls take."""
    d, s = d_model, seq
    attention = 2 * (2 * s * s * d) / 2                   # causal: only the lower triangle
    projections = 2 * s * d * 3 * d + 2 * s * d * d
    mlp = 2 * s * d * 4 * d + 2 * s * 4 * d * d
    head = 2 * s * d * vocab
    total = n_layers * (attention + projections + mlp) + head
    return n_layers * attention / total
''',
        "the MLP counted once (d -> 4d only, not back to d)": r'''
# ✏️ Exercise model.predict: edit this cell, run it, then run the check below
def attention_share(d_model, n_layers, seq, vocab):
    """The share of one forward's matmul FLOPs that attention's two S x S matmuls take."""
    d, s = d_model, seq
    attention = 2 * (2 * s * s * d)
    projections = 2 * s * d * 3 * d + 2 * s * d * d
    mlp = 2 * s * d * 4 * d
    head = 2 * s * d * vocab
    total = n_layers * (attention + projections + mlp) + head
    return n_layers * attention / total
''',
        "attention's FLOPs counted per head dim (one head's S x S products only)": r'''
# ✏️ Exercise model.predict: edit this cell, run it, then run the check below
N_HEADS = 12  # GPT-2 small


def attention_share(d_model, n_layers, seq, vocab):
    """The share of one forward's matmul FLOPs that attention's two S x S matmuls take."""
    d, s = d_model, seq
    head_dim = d // N_HEADS
    attention = 2 * (2 * s * s * head_dim)                # Q K^T and P V: (S x dh) @ (dh x S)
    projections = 2 * s * d * 3 * d + 2 * s * d * d
    mlp = 2 * s * d * 4 * d + 2 * s * 4 * d * d
    head = 2 * s * d * vocab
    total = n_layers * (attention + projections + mlp) + head
    return n_layers * attention / total
''',
    }
