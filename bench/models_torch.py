"""The models of bench/gpu_models.py on both sides, built so that ndlite's and PyTorch's have the
same structure and the same parameter names and shapes (their state dicts load into each other):

- `resnet18_cifar(nn)`: ResNet-18 for 32x32 inputs, written once against either framework's
  `nn` module (ndlite.nn or torch.nn) from layers both have;
- `vgg_cifar(nn)`, `mlp(nn, sizes)`: the issue's other shapes (a VGG-style CIFAR net with
  BatchNorm; plain MLPs), likewise written once for both;
- `TorchGPT`: a PyTorch mirror of `ndlite.nn.GPT` (ndlite/nn/gpt.py), module for module;
- `copy_weights(src, dst)`: an ndlite model's parameters and buffers into its torch twin;
- `same_model(ours, theirs)`: whether two sides of a row (gpu_models.Side) compute the same
  function: loss and gradients on one batch, in float32 and float64.

Importing this module imports neither framework; the torch classes are made on first use.
"""

from __future__ import annotations

import numpy as np


def resnet18_cifar(nn, num_classes: int = 10):
    """3x3 stem conv 64 (no maxpool), BasicBlocks [2, 2, 2, 2] with BatchNorm over widths
    64-128-256-512 (stride 2 from the second stage on, a 1x1 conv + BatchNorm shortcut where the
    shape changes), global average pool, fc `num_classes`; convolutions without bias, as in
    torchvision. `nn` is ndlite.nn or torch.nn."""

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + self.shortcut(x))

    layers = [nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False), nn.BatchNorm2d(64),
              nn.ReLU()]
    cin = 64
    for i, width in enumerate((64, 128, 256, 512)):
        for j in range(2):
            layers.append(BasicBlock(cin, width, 2 if i and not j else 1))
            cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return nn.Sequential(*layers)


def vgg_cifar(nn, widths=(64, 128, 256), num_classes: int = 10):
    """A VGG-style net for 3x32x32 inputs: per width two 3x3 convolutions (padding 1, with
    bias) each followed by BatchNorm and ReLU, then a 2x2 max-pool; flatten, fc `num_classes`.
    `nn` is ndlite.nn or torch.nn."""
    layers, cin = [], 3
    for width in widths:
        for _ in range(2):
            layers += [nn.Conv2d(cin, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
            cin = width
        layers.append(nn.MaxPool2d(2))
    side = 32 >> len(widths)
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(cin * side * side, num_classes))


def mlp(nn, sizes):
    """Linear layers of `sizes` (in, hidden..., out) with a ReLU between each two."""
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


_TORCH_GPT = None


def TorchGPT(vocab_size: int, block_size: int, n_layer: int = 6, n_head: int = 6,
             n_embd: int = 384, dropout: float = 0.0):
    """A torch.nn.Module mirroring ndlite.nn.GPT: the same submodule names (token, position,
    drop, blocks.i.{ln1, attn.{qkv, proj}, ln2, mlp.{0, 2, 3}}, ln_f, head), the same forward
    (pre-norm blocks, causal scaled_dot_product_attention with dropout, exact GELU, mean
    cross-entropy over every position). Its initial weights are PyTorch's defaults: copy an
    ndlite model's in with `copy_weights`."""
    global _TORCH_GPT
    if _TORCH_GPT is None:
        _TORCH_GPT = _torch_gpt_class()
    return _TORCH_GPT(vocab_size, block_size, n_layer, n_head, n_embd, dropout)


def _torch_gpt_class():
    import torch
    from torch import nn
    from torch.nn import functional as F

    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd: int, n_head: int, dropout_p: float):
            super().__init__()
            self.n_head, self.dropout_p = n_head, dropout_p
            self.qkv = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            batch, length, width = x.shape
            qkv = self.qkv(x).reshape(batch, length, 3, self.n_head, width // self.n_head)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            p = self.dropout_p if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
            y = y.transpose(1, 2).reshape(batch, length, width)
            return F.dropout(self.proj(y), p, self.training)

    class Block(nn.Module):
        def __init__(self, n_embd: int, n_head: int, dropout_p: float):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention(n_embd, n_head, dropout_p)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                     nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout_p))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout):
            super().__init__()
            self.vocab_size, self.block_size = vocab_size, block_size
            self.token = nn.Embedding(vocab_size, n_embd)
            self.position = nn.Embedding(block_size, n_embd)
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList([Block(n_embd, n_head, dropout) for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab_size)

        def forward(self, idx, targets=None):
            batch, length = idx.shape
            positions = torch.arange(length, device=idx.device)
            x = self.drop(self.token(idx) + self.position(positions))
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            if targets is None:
                return logits, None
            loss = F.cross_entropy(logits.reshape(batch * length, self.vocab_size),
                                   targets.reshape(batch * length))
            return logits, loss

    return GPT


def copy_weights(src, dst) -> None:
    """Every parameter and buffer of the ndlite model `src` into the torch model `dst` (same
    names and shapes, strictly: a missing or extra name is an error)."""
    import torch

    own = dst.state_dict()
    values = {name: np.array(t.numpy(), copy=True) for name, t in src.state_dict().items()}
    missing, extra = sorted(set(own) - set(values)), sorted(set(values) - set(own))
    if missing or extra:
        raise KeyError(f"copy_weights: torch model lacks {extra}, ndlite model lacks {missing}")
    for name, value in values.items():
        if tuple(value.shape) != tuple(own[name].shape):
            raise ValueError(f"copy_weights: {name} is {value.shape} in ndlite but "
                             f"{tuple(own[name].shape)} in torch")
    dst.load_state_dict({name: torch.from_numpy(value).to(own[name].dtype)
                         for name, value in values.items()})


def loss_and_grads(side, x, y) -> tuple[float, list[np.ndarray]]:
    train = side.model.training
    if side.workload == "char_gpt":
        side.model.eval()  # dropout off: both sides then compute one deterministic function
    side.opt.zero_grad()
    loss = side.loss(side.to(x), side.to(y))
    loss.backward()
    side.model.train(train)
    grads = [np.array(p.grad.detach().cpu().numpy() if side.is_torch else p.grad.numpy(),
                      copy=True) for p in side.model.parameters()]
    value = float(loss.item())
    side.opt.zero_grad()
    return value, grads


def compare(ours, theirs, dtype) -> dict:
    """Loss and gradients of both sides on the first batch in `dtype` (the models cast there
    and back: float32 -> float64 -> float32 is exact, and no optimizer has state yet)."""
    x, y = ours.host_batches[0]
    if x.dtype.kind == "f":
        x = x.astype(dtype)
    for side in (ours, theirs):
        side.model.double() if dtype == np.float64 else side.model.float()
    try:
        loss_n, grads_n = loss_and_grads(ours, x, y)
        loss_t, grads_t = loss_and_grads(theirs, x, y)
    finally:
        for side in (ours, theirs):
            side.model.float()
    # each tensor against its own largest gradient, but never below a millionth of the
    # model's: a gradient that is zero but for rounding (a convolution's bias before a
    # BatchNorm, which subtracts it again) would otherwise compare noise with noise
    floor = 1e-6 * max((float(np.max(np.abs(b))) for b in grads_t if b.size), default=0.0)
    rel = max(float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), floor, 1e-30))
              for a, b in zip(grads_n, grads_t, strict=True) if b.size)
    return {"loss_ndlite": loss_n, "loss_torch": loss_t, "max_abs_loss_diff": abs(loss_n - loss_t),
            "max_grad_rel_diff": rel, "tensors": len(grads_n)}


def same_model(ours, theirs) -> dict:
    """Whether both sides compute the same function from the same weights: loss and gradients
    (relative to each tensor's largest, or to a millionth of the model's largest where that
    is more) on the first batch, in train mode (BatchNorm on batch
    statistics; the GPT with dropout off). Decided in float64, where rounding cannot hide a
    difference of model (tolerance 1e-9 on the loss, 1e-7 on gradients); the float32 figures
    are kept too (BatchNorm's gradients cancel: float32 can differ by 1e-2 relative there).
    A backend without float64 is judged in float32 (1e-3 on the loss, 5e-2 on gradients)."""
    out = {"float32": compare(ours, theirs, np.float32)}
    try:
        out["float64"] = compare(ours, theirs, np.float64)
        judged, loss_tol, grad_tol = out["float64"], 1e-9, 1e-7
    except Exception as exc:  # noqa: BLE001 - a backend without float64: judge float32
        out["float64"] = f"failed: {type(exc).__name__}: {exc}"
        judged, loss_tol, grad_tol = out["float32"], 1e-3, 5e-2
    out["same"] = (judged["max_abs_loss_diff"] <= loss_tol * max(1.0, abs(judged["loss_torch"]))
                   and judged["max_grad_rel_diff"] <= grad_tol)
    return out
