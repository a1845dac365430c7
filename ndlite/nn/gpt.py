"""A decoder-only transformer for characters (GPT): token and position embeddings, pre-norm
blocks of causal self-attention and a 4x GELU MLP, a final LayerNorm and a linear head.

The shape follows the lecture "Let's build GPT" and nanoGPT's model.py: weights N(0, 0.02),
zero biases, the residual projections scaled by 1/sqrt(2 * n_layer). `ndlite train gpt` trains
it on a text file (ndlite/cli/train_gpt.py).
"""

from __future__ import annotations

import math

from ..creation import arange
from ..graph import no_grad
from ..ops.activation import dropout, softmax
from ..ops.join import cat
from ..ops.loss import cross_entropy
from ..ops.transformer import scaled_dot_product_attention
from ..random import multinomial
from .activation import GELU
from .container import ModuleList, Sequential
from .init import normal_, zeros_
from .layers import Dropout, Linear
from .module import Module
from .transformer_layers import Embedding, LayerNorm


class CausalSelfAttention(Module):
    """n_head heads over n_embd channels; query, key and value from one Linear."""

    def __init__(self, n_embd: int, n_head: int, dropout_p: float):
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"CausalSelfAttention: n_embd {n_embd} is not a multiple of "
                             f"n_head {n_head}")
        self.n_head, self.dropout_p = n_head, dropout_p
        self.qkv = Linear(n_embd, 3 * n_embd)
        self.proj = Linear(n_embd, n_embd)

    def forward(self, x):
        batch, length, width = x.shape
        qkv = self.qkv(x).reshape(batch, length, 3, self.n_head, width // self.n_head)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # (3, B, heads, T, head size)
        q, k, v = qkv[0], qkv[1], qkv[2]
        p = self.dropout_p if self.training else 0.0
        y = scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        y = y.transpose(1, 2).reshape(batch, length, width)
        return dropout(self.proj(y), p, self.training)


class Block(Module):
    """x + attention(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, n_embd: int, n_head: int, dropout_p: float):
        super().__init__()
        self.ln1, self.ln2 = LayerNorm(n_embd), LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout_p)
        self.mlp = Sequential(Linear(n_embd, 4 * n_embd), GELU(), Linear(4 * n_embd, n_embd),
                              Dropout(dropout_p))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(Module):
    """Logits over `vocab_size` for every position of a (B, T) batch of token ids, T <=
    block_size; with targets, also the mean cross-entropy.

    >>> import ndlite
    >>> model = ndlite.nn.GPT(vocab_size=5, block_size=8, n_layer=1, n_head=2, n_embd=8)
    >>> logits, loss = model(ndlite.tensor([[1, 2, 3]]), ndlite.tensor([[2, 3, 4]]))
    >>> logits.shape, round(loss.item(), 1)
    ((1, 3, 5), 1.6)
    """

    def __init__(self, vocab_size: int, block_size: int, n_layer: int = 6, n_head: int = 6,
                 n_embd: int = 384, dropout: float = 0.0):
        super().__init__()
        self.vocab_size, self.block_size = vocab_size, block_size
        self.token = Embedding(vocab_size, n_embd)
        self.position = Embedding(block_size, n_embd)
        self.drop = Dropout(dropout)
        self.blocks = ModuleList([Block(n_embd, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = LayerNorm(n_embd)
        self.head = Linear(n_embd, vocab_size)
        self.apply(_init_weights)
        for block in self.blocks:  # residual projections, scaled as in GPT-2
            normal_(block.attn.proj.weight, std=0.02 / math.sqrt(2 * n_layer))
            normal_(block.mlp[2].weight, std=0.02 / math.sqrt(2 * n_layer))

    def forward(self, idx, targets=None):
        batch, length = idx.shape
        if length > self.block_size:
            raise ValueError(f"GPT: a sequence of {length} tokens is longer than block_size "
                             f"{self.block_size}")
        positions = arange(length, backend=idx.backend)
        x = self.drop(self.token(idx) + self.position(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        loss = cross_entropy(logits.reshape(batch * length, self.vocab_size),
                             targets.reshape(batch * length))
        return logits, loss

    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0, generator=None):
        """Extend (B, T) token ids by sampling max_new_tokens, each from the softmax of the
        last position's logits / temperature (the context cropped to block_size)."""
        was_training = self.training
        self.eval()
        with no_grad():
            for _ in range(max_new_tokens):
                logits, _ = self(idx[:, -self.block_size:])
                probs = softmax(logits[:, -1, :] / temperature, dim=-1)
                nxt = multinomial(probs, 1, generator=generator).to(idx.dtype)
                idx = cat([idx, nxt], dim=1)
        self.train(was_training)
        return idx


def _init_weights(module: Module) -> None:
    if isinstance(module, Linear):
        normal_(module.weight, std=0.02)
        if module.bias is not None:
            zeros_(module.bias)
    elif isinstance(module, Embedding):
        normal_(module.weight, std=0.02)
