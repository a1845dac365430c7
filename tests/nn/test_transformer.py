"""MultiheadAttention and the Transformer modules: mask semantics and outputs against an
independent float64 NumPy reference and gradients against finite differences on every
backend (torch-free, so CI checks them); state dict names, errors; and, where torch is
installed, outputs and every parameter and input gradient against PyTorch with its weights
loaded through load_state_dict."""

import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F
from ndlite import nn
from ndlite.errors import DTypeError, ShapeError
from ndlite.testing.gradcheck import gradcheck

F64 = ndlite.float64
N, L, S, E, H = 2, 4, 5, 6, 2


def _rng(seed=0):
    return np.random.default_rng(seed)


def _need_fp64(backend):
    if np.dtype("float64") not in backend.dtypes:
        pytest.skip(f"{backend.name} has no float64 on this device")


# ---- an independent NumPy float64 reference ------------------------------------------------

def _additive(mask):
    return np.where(mask, -np.inf, 0.0) if mask.dtype == bool else mask


def _np_mha(q, k, v, params, attn_mask=None, key_padding_mask=None):
    """Batch-first attention: (output (N, L, E), weights (N, H, L, S))."""
    w_q, w_k, w_v = np.split(params["in_proj_weight"], 3)
    b_q, b_k, b_v = np.split(params["in_proj_bias"], 3)
    hd = q.shape[-1] // H

    def heads(x):
        return x.reshape(x.shape[0], x.shape[1], H, hd).transpose(0, 2, 1, 3)

    qh, kh, vh = heads(q @ w_q.T + b_q), heads(k @ w_k.T + b_k), heads(v @ w_v.T + b_v)
    scores = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(hd)
    if attn_mask is not None:
        add = _additive(attn_mask)
        scores = scores + (add if add.ndim == 2 else add.reshape(q.shape[0], H, *add.shape[1:]))
    if key_padding_mask is not None:
        scores = scores + _additive(key_padding_mask)[:, None, None, :]
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ vh).transpose(0, 2, 1, 3).reshape(q.shape)
    return out @ params["out_proj.weight"].T + params["out_proj.bias"], p


def _masks(kind, rng):
    """Masks that leave every query at least one key (no all -inf row)."""
    causalish = np.triu(np.ones((L, S), dtype=bool), k=2)
    padding = np.zeros((N, S), dtype=bool)
    padding[1, -2:] = True
    float_mask = rng.standard_normal((N * H, L, S))
    return {"none": (None, None), "bool_attn": (causalish, None),
            "float_attn_3d": (float_mask, None), "bool_padding": (None, padding),
            "float_padding": (None, np.where(padding, -1e9, 0.0) + 0.5),
            "both": (causalish, padding)}[kind]


def _mha(backend, **kw):
    with ndlite.using(backend):
        return nn.MultiheadAttention(E, H, batch_first=True, dtype=F64, **kw)


def _tensor(a, backend, grad=False):
    return None if a is None else ndlite.tensor(a, backend=backend, requires_grad=grad)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("kind", ["none", "bool_attn", "float_attn_3d", "bool_padding",
                                  "float_padding", "both"])
def test_mha_masks_match_numpy_reference(backend, kind, need_weights):
    _need_fp64(backend)
    rng = _rng(1)
    mha = _mha(backend)
    params = {k: v.numpy() for k, v in mha.state_dict().items()}
    params["in_proj_bias"] = rng.standard_normal(3 * E)  # nonzero, so biases are checked
    mha.load_state_dict(params)
    q, k, v = rng.standard_normal((N, L, E)), rng.standard_normal((N, S, E)), \
        rng.standard_normal((N, S, E))
    attn_mask, padding = _masks(kind, rng)
    out, weights = mha(*(_tensor(a, backend) for a in (q, k, v)),
                       key_padding_mask=_tensor(padding, backend),
                       attn_mask=_tensor(attn_mask, backend), need_weights=need_weights,
                       average_attn_weights=False)
    ref_out, ref_weights = _np_mha(q, k, v, params, attn_mask, padding)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-10, atol=1e-12)
    if need_weights:
        np.testing.assert_allclose(weights.detach().numpy(), ref_weights, rtol=1e-10, atol=1e-12)
    else:
        assert weights is None


def test_bool_mask_is_true_where_masked(backend):
    """True in a bool mask hides the key: the same output as -inf there, and zero weight."""
    _need_fp64(backend)
    rng = _rng(2)
    mha = _mha(backend)
    x = _tensor(rng.standard_normal((N, L, E)), backend)
    hide = np.zeros((L, L), dtype=bool)
    hide[:, 1] = True
    out_bool, w = mha(x, x, x, attn_mask=_tensor(hide, backend))
    out_float, _ = mha(x, x, x, attn_mask=_tensor(np.where(hide, -np.inf, 0.0), backend))
    np.testing.assert_array_equal(w.detach().numpy()[:, :, 1], 0.0)
    np.testing.assert_allclose(out_bool.detach().numpy(), out_float.detach().numpy(), rtol=0,
                               atol=1e-14)
    causal = nn.Transformer.generate_square_subsequent_mask(L, dtype=F64, device=backend)
    _, w = mha(x, x, x, attn_mask=causal)
    np.testing.assert_array_equal(np.triu(w.detach().numpy(), k=1), 0.0)


def _fd_check(module, inputs, call, eps=1e-6, seed=0):
    """Backward against a central difference along a random direction in every parameter
    and every float input at once (float64)."""
    rng = _rng(seed)
    params = list(module.parameters())
    out = call(module, inputs)
    cot = ndlite.tensor(rng.standard_normal(out.shape), backend=out.backend)
    grads = ndlite.autograd.grad((out * cot).sum(), params + inputs)
    dirs = [rng.standard_normal(t.shape) for t in params + inputs]
    exact = sum(float(np.sum(g.numpy() * d)) for g, d in zip(grads, dirs, strict=True))
    start = [t.detach().numpy().copy() for t in params + inputs]

    def loss_at(step):
        with ndlite.no_grad():
            for t, a, d in zip(params + inputs, start, dirs, strict=True):
                t.copy_(ndlite.tensor(a + step * d, backend=t.backend))
            return float((call(module, inputs) * cot).sum().item())

    numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
    loss_at(0.0)
    assert abs(numeric - exact) <= 1e-5 + 1e-3 * abs(numeric), (numeric, exact)


@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_finite_differences(backend, need_weights):
    _need_fp64(backend)
    rng = _rng(3)
    mha = _mha(backend, kdim=3, vdim=4, add_bias_kv=True)
    q, k, v = (_tensor(rng.standard_normal(s), backend, True)
               for s in ((N, L, E), (N, S, 3), (N, S, 4)))
    attn_mask, padding = _masks("both", rng)
    masks = dict(attn_mask=_tensor(attn_mask, backend),
                 key_padding_mask=_tensor(padding, backend))

    def call(m, t):
        out, w = m(*t, need_weights=need_weights, **masks)
        return out if w is None else out + w.sum(-1, keepdim=True)

    _fd_check(mha, [q, k, v], call)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_finite_differences(backend, norm_first):
    _need_fp64(backend)
    with ndlite.using(backend):
        layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=8, dropout=0.0,
                                           activation="gelu", norm_first=norm_first,
                                           dtype=F64)
    src = _tensor(_rng(4).standard_normal((L, N, E)), backend, True)
    mask = nn.Transformer.generate_square_subsequent_mask(L, dtype=F64, device=backend)
    _fd_check(layer, [src], lambda m, t: m(t[0], src_mask=mask, is_causal=True))


def test_functional_gradcheck_separate_weights():
    rng = _rng(5)
    arrays = [rng.standard_normal(s) for s in ((L, N, E), (S, N, 3), (S, N, 4), (E, E),
                                                (E, 3), (E, 4), (3 * E,), (E, E), (E,))]
    padding = ndlite.tensor(_masks("bool_padding", rng)[1], backend="numpy")  # gradcheck's

    def fn(t):
        q, k, v, wq, wk, wv, b, wo, bo = t
        return F.multi_head_attention_forward(
            q, k, v, E, H, None, b, None, None, True, 0.0, wo, bo, key_padding_mask=padding,
            use_separate_proj_weight=True, q_proj_weight=wq, k_proj_weight=wk,
            v_proj_weight=wv, average_attn_weights=False)

    gradcheck(fn, arrays, list(range(len(arrays))), name="multi_head_attention_forward")


def test_state_dict_names_and_initialization():
    mha = nn.MultiheadAttention(E, H, kdim=3, vdim=4, add_bias_kv=True)
    assert list(mha.state_dict()) == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                      "in_proj_bias", "bias_k", "bias_v", "out_proj.weight",
                                      "out_proj.bias"]  # PyTorch's order
    assert mha.in_proj_weight is None
    np.testing.assert_array_equal(mha.in_proj_bias.detach().numpy(), 0.0)
    np.testing.assert_array_equal(mha.out_proj.bias.detach().numpy(), 0.0)
    packed = nn.MultiheadAttention(E, H, bias=False).in_proj_weight.detach().numpy()
    bound = np.sqrt(6.0 / (E + 3 * E))  # xavier_uniform_ over (3E, E)
    assert np.abs(packed).max() <= bound and np.abs(packed).max() > bound / 2
    layer = nn.TransformerDecoderLayer(E, H, dim_feedforward=8)
    assert sorted({k.split(".")[0] for k in layer.state_dict()}) == [
        "linear1", "linear2", "multihead_attn", "norm1", "norm2", "norm3", "self_attn"]
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 8), 2)
    first, second = (layer.linear1.weight for layer in encoder.layers)
    assert first is not second
    np.testing.assert_array_equal(first.detach().numpy(), second.detach().numpy())
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.dtype == ndlite.float32
    assert mask.tolist() == [[0.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]]


def test_errors_name_the_shapes():
    mha = nn.MultiheadAttention(E, H)
    x = ndlite.ones(L, N, E)
    with pytest.raises(ShapeError, match=r"key_padding_mask shape of \(2, 4\).*\(2, 5\)"):
        mha(x, x, x, key_padding_mask=ndlite.zeros(N, S, dtype=ndlite.bool))
    with pytest.raises(ShapeError, match=r"2-D attn_mask is \(4, 5\), but should be \(4, 4\)"):
        mha(x, x, x, attn_mask=ndlite.zeros(L, S))
    with pytest.raises(ShapeError, match=r"3-D attn_mask is \(2, 4, 4\).*\(4, 4, 4\)"):
        mha(x, x, x, attn_mask=ndlite.zeros(2, L, L))
    with pytest.raises(ShapeError, match=r"query \(4, 2, 5\) has embed_dim 5; expected 6"):
        mha(ndlite.ones(L, N, 5), x, x)
    with pytest.raises(ShapeError, match=r"query \(4, 2, 6\) and key \(4, 3, 6\) have diff"):
        mha(x, ndlite.ones(L, 3, E), ndlite.ones(L, 3, E))
    with pytest.raises(ShapeError, match=r"key \(4, 2, 6\) and value \(5, 2, 6\)"):
        mha(x, x, ndlite.ones(S, N, E))
    with pytest.raises(ShapeError, match=r"k_proj_weight must have shape \(6, 6\) for "
                       r"input \(4, 2, 6\), got \(6, 3\)"):
        nn.MultiheadAttention(E, H, kdim=3)(x, x, x)
    with pytest.raises(DTypeError, match="only bool and floating types of attn_mask"):
        mha(x, x, x, attn_mask=ndlite.zeros(L, L, dtype=ndlite.int64))
    with pytest.raises(ValueError, match="need attn_mask if specifying the is_causal"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(ValueError, match=r"embed_dim \(6\) must be divisible by num_heads"):
        nn.MultiheadAttention(E, 4)
    with pytest.raises(ValueError, match="activation should be relu/gelu"):
        nn.TransformerEncoderLayer(E, H, activation="swish")
    model = nn.Transformer(E, H, 1, 1, 8)
    with pytest.raises(ShapeError, match=r"batch number of src \(5, 2, 6\) and tgt \(4, 3, 6\)"):
        model(ndlite.ones(S, N, E), ndlite.ones(L, 3, E))


# ---- against PyTorch ---------------------------------------------------------------------


def _pair(make):
    """The same module in torch (seeded, float64) and ndlite, the torch weights loaded into
    ndlite through load_state_dict of a NumPy state dict."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = make(torch).double()
    ours = make(ndlite).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return theirs, ours


def _against_torch(make, call, arrays, train=False, rtol=1e-9, atol=1e-11):
    """Outputs, and the gradients of every parameter and float input, of call(module, inputs,
    lib) in torch and ndlite."""
    torch = pytest.importorskip("torch")
    theirs, ours = _pair(make)
    theirs.train(train)
    ours.train(train)
    floats = [a.dtype.kind == "f" for a in arrays]
    t_in = [torch.tensor(a, requires_grad=f) for a, f in zip(arrays, floats, strict=True)]
    n_in = [ndlite.tensor(a, requires_grad=f) for a, f in zip(arrays, floats, strict=True)]
    t_out, n_out = call(theirs, t_in, torch), call(ours, n_in, ndlite)
    t_out, n_out = (o if isinstance(o, tuple) else (o,) for o in (t_out, n_out))
    rng, t_loss, n_loss = _rng(7), 0, 0
    for t, n in zip(t_out, n_out, strict=True):
        assert (t is None) == (n is None)
        if t is None:
            continue
        np.testing.assert_allclose(n.detach().numpy(), t.detach().numpy(), rtol, atol)
        cot = rng.standard_normal(tuple(t.shape))
        t_loss, n_loss = t_loss + (t * torch.tensor(cot)).sum(), n_loss + (n * cot).sum()
    t_loss.backward()
    n_loss.backward()
    params = dict(ours.named_parameters())
    assert sorted(params) == sorted(k for k, _ in theirs.named_parameters())
    for name, p in theirs.named_parameters():
        assert (p.grad is None) == (params[name].grad is None), name
        if p.grad is not None:
            np.testing.assert_allclose(params[name].grad.numpy(), p.grad.numpy(), rtol, atol,
                                       err_msg=name)
    for t, n, f in zip(t_in, n_in, floats, strict=True):
        if f:
            np.testing.assert_allclose(n.grad.numpy(), t.grad.numpy(), rtol, atol)


def _lib_masks(lib, attn_mask, padding):
    return dict(attn_mask=None if attn_mask is None else lib.tensor(attn_mask),
                key_padding_mask=None if padding is None else lib.tensor(padding))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("weights", ["none", "averaged", "per_head"])
@pytest.mark.parametrize("kind", ["none", "bool_attn", "float_attn_3d", "bool_padding",
                                  "float_padding", "both"])
def test_mha_against_torch(batch_first, weights, kind):
    rng = _rng(8)
    masks = _masks(kind, rng)
    shape = (lambda b, t, e: (b, t, e)) if batch_first else (lambda b, t, e: (t, b, e))
    arrays = [rng.standard_normal(shape(N, t, E)) for t in (L, S, S)]

    def call(m, t, lib):
        return m(*t, need_weights=weights != "none", average_attn_weights=weights == "averaged",
                 **_lib_masks(lib, *masks))

    _against_torch(lambda lib: lib.nn.MultiheadAttention(E, H, batch_first=batch_first),
                   call, arrays)


VARIANTS = {
    "kdim_vdim": (dict(kdim=3, vdim=4), [(N, L, E), (N, S, 3), (N, S, 4)], {}),
    "no_bias": (dict(bias=False), [(N, L, E), (N, S, E), (N, S, E)], {}),
    "bias_kv_zero_attn": (dict(add_bias_kv=True, add_zero_attn=True),
                          [(N, L, E), (N, S, E), (N, S, E)], {"mask": "both"}),
    "unbatched": (dict(), [(L, E), (S, E), (S, E)], {}),
    "self_attention_causal_hint": (dict(), [(N, L, E)], {"causal": True}),
    "eval_dropout": (dict(dropout=0.5), [(N, L, E), (N, S, E), (N, S, E)], {}),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_mha_variants_against_torch(variant):
    kwargs, shapes, how = VARIANTS[variant]
    rng = _rng(9)
    arrays = [rng.standard_normal(s) for s in shapes]
    masks = _masks(how.get("mask", "none"), rng)

    def call(m, t, lib):
        q, k, v = t if len(t) == 3 else t * 3
        if how.get("causal"):
            mask = lib.nn.Transformer.generate_square_subsequent_mask(L, dtype=lib.float64)
            return m(q, k, v, attn_mask=mask, is_causal=True, need_weights=False)
        return m(q, k, v, **_lib_masks(lib, *masks))

    _against_torch(lambda lib: lib.nn.MultiheadAttention(E, H, batch_first=True, **kwargs),
                   call, arrays)


ACTIVATIONS = {"relu": lambda lib: "relu", "gelu": lambda lib: "gelu",
               "callable": lambda lib: (lambda x: x.tanh()), "module": lambda lib: lib.nn.GELU()}


def _layer_masks(lib, batch_first):
    """A causal float mask over L and a bool key padding mask hiding the last 2 of batch 1."""
    padding = np.zeros((N, L), dtype=bool)
    padding[1, -2:] = True
    return lib.nn.Transformer.generate_square_subsequent_mask(L, dtype=lib.float64), \
        lib.tensor(padding)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layer_against_torch(batch_first, norm_first, activation):
    src = _rng(10).standard_normal((N, L, E) if batch_first else (L, N, E))

    def make(lib):
        return lib.nn.TransformerEncoderLayer(E, H, 8, dropout=0.0, batch_first=batch_first,
                                              norm_first=norm_first,
                                              activation=ACTIVATIONS[activation](lib))

    def call(m, t, lib):
        mask, padding = _layer_masks(lib, batch_first)
        return m(t[0], src_mask=mask, src_key_padding_mask=padding)

    _against_torch(make, call, [src])


@pytest.mark.parametrize("layer", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
def test_layers_without_bias_against_torch(layer):
    """bias=False drops every Linear, projection and LayerNorm bias, as in PyTorch."""
    rng = _rng(16)
    arrays = [rng.standard_normal((L, N, E)) for _ in range(1 if "Encoder" in layer else 2)]
    _against_torch(lambda lib: getattr(lib.nn, layer)(E, H, 8, dropout=0.0, bias=False,
                                                      layer_norm_eps=1e-3),
                   lambda m, t, lib: m(*t), arrays)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_against_torch(batch_first, norm_first):
    rng = _rng(11)
    shape = (lambda t: (N, t, E)) if batch_first else (lambda t: (t, N, E))
    memory_padding = np.zeros((N, S), dtype=bool)
    memory_padding[0, 0] = True

    def call(m, t, lib):
        mask, padding = _layer_masks(lib, batch_first)
        return m(t[0], t[1], tgt_mask=mask, tgt_key_padding_mask=padding,
                 memory_key_padding_mask=lib.tensor(memory_padding), tgt_is_causal=True)

    _against_torch(lambda lib: lib.nn.TransformerDecoderLayer(
        E, H, 8, dropout=0.0, batch_first=batch_first, norm_first=norm_first),
        call, [rng.standard_normal(shape(L)), rng.standard_normal(shape(S))])


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_against_torch(batch_first, norm_first, train):
    """The whole encoder-decoder; train=True with dropout 0, eval with PyTorch's dropout."""
    rng = _rng(12)
    shape = (lambda t: (N, t, E)) if batch_first else (lambda t: (t, N, E))
    src_padding = np.zeros((N, S), dtype=bool)
    src_padding[1, -1] = True

    def call(m, t, lib):
        mask, padding = _layer_masks(lib, batch_first)
        return m(t[0], t[1], tgt_mask=mask, tgt_key_padding_mask=padding,
                 src_key_padding_mask=lib.tensor(src_padding),
                 memory_key_padding_mask=lib.tensor(src_padding))

    _against_torch(lambda lib: lib.nn.Transformer(
        E, H, 2, 2, 8, dropout=0.0 if train else 0.1, batch_first=batch_first,
        norm_first=norm_first), call, [rng.standard_normal(shape(S)),
                                       rng.standard_normal(shape(L))], train=train)


@pytest.mark.parametrize("mask_kind", ["generated", "bool", "none_is_causal"])
def test_encoder_stack_causal_detection_against_torch(mask_kind):
    """A mask equal to the causal one turns on the is_causal path; results stay the same."""
    def call(m, t, lib):
        if mask_kind == "generated":
            return m(t[0], mask=lib.nn.Transformer.generate_square_subsequent_mask(
                L, dtype=lib.float64))
        causal = lib.tensor(np.triu(np.ones((L, L), dtype=bool), k=1))
        return m(t[0], mask=causal, is_causal=mask_kind == "none_is_causal")

    def make(lib):
        layer = lib.nn.TransformerEncoderLayer(E, H, 8, dropout=0.0)
        return lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(E),
                                         enable_nested_tensor=False)

    _against_torch(make, call, [_rng(13).standard_normal((L, N, E))])


def _language_model(lib, ntoken=11, ninp=6, nhead=2, nhid=8, nlayers=2):
    """A causal language model written the way pytorch/examples' word_language_model writes
    its TransformerModel: an nn.Transformer subclass whose `decoder` is replaced by a Linear
    over the vocabulary, a sinusoidal positional table kept as a buffer, and a causal mask
    built from triu/masked_fill and cached on the module."""
    nn_, functional = lib.nn, lib.nn.functional

    class Model(nn_.Transformer):
        def __init__(self):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                             num_encoder_layers=nlayers)
            self.src_mask, self.ninp = None, ninp
            self.input_emb = nn_.Embedding(ntoken, ninp)
            self.decoder = nn_.Linear(ninp, ntoken)
            self.dropout_in = nn_.Dropout(0.5)
            table = lib.zeros(32, ninp)
            where = lib.arange(0, 32, dtype=lib.float).unsqueeze(1)
            rate = lib.exp(lib.arange(0, ninp, 2).float() * (-np.log(10000.0) / ninp))
            table[:, 0::2] = lib.sin(where * rate)
            table[:, 1::2] = lib.cos(where * rate)
            self.register_buffer("pe", table.unsqueeze(0).transpose(0, 1))
            nn_.init.uniform_(self.input_emb.weight, -0.1, 0.1)
            nn_.init.zeros_(self.decoder.bias)

        def forward(self, src):
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                keep = (lib.triu(lib.ones(len(src), len(src))) == 1).transpose(0, 1)
                self.src_mask = keep.float().masked_fill(keep == 0, float("-inf")) \
                    .masked_fill(keep == 1, 0.0).to(src.device)
            x = self.input_emb(src) * np.sqrt(self.ninp)
            x = self.dropout_in(x + self.pe[:x.size(0), :])
            return functional.log_softmax(self.decoder(self.encoder(x, mask=self.src_mask)),
                                          dim=-1)

    return Model()


def test_word_language_model_transformer_against_torch():
    tokens = _rng(14).integers(0, 11, size=(L, N))
    _against_torch(_language_model, lambda m, t, lib: m(t[0]), [tokens])


def test_dropout_in_training_only(backend):
    """Training drops attention weights (each kept one scaled by 1 / (1 - p)); eval is the
    dropout-free math."""
    _need_fp64(backend)
    mha = _mha(backend, dropout=0.5)
    x = _tensor(_rng(15).standard_normal((N, L, E)), backend)
    plain = _mha(backend)
    plain.load_state_dict(mha.state_dict())
    expected_out, expected = (t.detach().numpy() for t in plain(x, x, x,
                                                               average_attn_weights=False))
    mha.eval()
    out, _ = mha(x, x, x)
    np.testing.assert_allclose(out.detach().numpy(), expected_out, rtol=1e-12, atol=1e-14)
    mha.train()
    ndlite.manual_seed(0)
    _, dropped = mha(x, x, x, average_attn_weights=False)
    dropped = dropped.detach().numpy()
    kept = dropped != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(dropped[kept], 2 * expected[kept], rtol=1e-12)
    out, _ = mha(x, x, x, need_weights=False)
    assert not np.allclose(out.detach().numpy(), expected_out)


@pytest.mark.parametrize("module", ["ndlite.nn.attention", "ndlite.nn.transformer"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed
