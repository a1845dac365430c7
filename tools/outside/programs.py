"""The outside programs compared by lockstep.py: how each is built, stepped and fed.

Sizes are small so both libraries run a few dozen steps in seconds on a CPU; the model code
is the outside file's own, the optimizer is the one its training script uses.
"""

from __future__ import annotations

import os

import numpy as np
from lockstep import char_batches
from swap import load_module


def _item(loss) -> float:
    return loss.item()


class NanoGPT:
    """karpathy/nanoGPT model.py: GPT + its configure_optimizers (AdamW, decay groups) and
    train.py's step (clip_grad_norm_ 1.0)."""
    name, file, keep = "nanoGPT model.py", "nanogpt_model.py", "all"
    batch, block = 8, 64

    def __init__(self, data):
        self.data = data

    def env(self, side):
        return {}

    def batches(self, data, steps):
        return char_batches(data["ids"], steps, self.batch, self.block)

    def build(self, mod, side, data):
        cfg = mod.GPTConfig(block_size=self.block, vocab_size=data["vocab"], n_layer=2, n_head=4,
                            n_embd=64, dropout=0.0, bias=True)
        return mod.GPT(cfg)

    def mode(self, model):
        model.train()

    def make_step(self, model, side):
        opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), side.device)

        def step(model, x, y):
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            side.T.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return _item(loss)
        return step


class LectureGPT(NanoGPT):
    """karpathy/ng-video-lecture gpt.py: its classes (the file's training code at module level
    is left out; its hyper-parameters come from env) and its loop's AdamW step."""
    name, file, keep = "ng-video-lecture gpt.py", "gpt.py", "definitions"
    batch, block = 16, 32

    def env(self, side):
        return dict(batch_size=self.batch, block_size=self.block, n_embd=64, n_head=4, n_layer=2,
                    dropout=0.0, vocab_size=self.data["vocab"], device=side.device,
                    learning_rate=1e-3)

    def build(self, mod, side, data):
        return mod.GPTLanguageModel()

    def make_step(self, model, side):
        opt = side.T.optim.AdamW(model.parameters(), lr=1e-3)

        def step(model, x, y):
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return _item(loss)
        return step


def word_data(root: str) -> dict:
    """word_language_model's own data.Corpus (the torch one; the swapped one must agree)."""
    folder = os.path.join(root, "data", "shakespeare-words")
    path = os.path.join(root, "src", "wlm", "data.py")
    corpora = {lib: load_module(path, lib).Corpus(folder) for lib in ("torch", "ndlite")}
    ids = {lib: np.asarray(c.train.numpy()) for lib, c in corpora.items()}
    assert np.array_equal(ids["torch"], ids["ndlite"]), "data.Corpus differs under ndlite"
    return {"ids": ids["torch"], "vocab": len(corpora["torch"].dictionary)}


class WordLSTM:
    """pytorch/examples word_language_model model.py RNNModel('LSTM') with main.py's train()
    step: NLLLoss, clip_grad_norm_ 0.25, p.data.add_(p.grad, alpha=-lr), lr 20, the hidden
    state carried (detached) from batch to batch."""
    name, file, keep = "word_language_model LSTM", os.path.join("wlm", "model.py"), "all"
    bsz, bptt, lr, clip = 20, 35, 20.0, 0.25

    def __init__(self, data):
        self.data = data

    def env(self, side):
        return {}

    def batches(self, data, steps):
        ids = data["ids"]
        nbatch = len(ids) // self.bsz
        cols = ids[:nbatch * self.bsz].reshape(self.bsz, -1).T.copy()
        starts = range(0, len(cols) - 1, self.bptt)
        assert len(starts) >= steps, f"the corpus has {len(starts)} batches, {steps} asked"
        return [(cols[i:i + self.bptt], cols[i + 1:i + 1 + self.bptt].reshape(-1))
                for i in list(starts)[:steps] if i + self.bptt < len(cols)]

    def build(self, mod, side, data):
        return mod.RNNModel("LSTM", data["vocab"], 64, 64, 2, dropout=0.0)

    def mode(self, model):
        model.train()

    def forward(self, model, x, state):
        if state.get("hidden") is None:
            state["hidden"] = model.init_hidden(self.bsz)
        hidden = tuple(h.detach() for h in state["hidden"])
        output, state["hidden"] = model(x, hidden)
        return output

    def make_step(self, model, side):
        criterion, state = side.T.nn.NLLLoss(), {}

        def step(model, x, y):
            model.zero_grad()
            output = self.forward(model, x, state)
            loss = criterion(output, y)
            loss.backward()
            side.T.nn.utils.clip_grad_norm_(model.parameters(), self.clip)
            for p in model.parameters():
                if p.grad is not None:  # nn.Transformer's unused decoder has none
                    p.data.add_(p.grad, alpha=-self.lr)
            return _item(loss)
        return step


class WordTransformer(WordLSTM):
    """word_language_model TransformerModel (an nn.Transformer subclass, causal mask from
    torch.log(torch.tril(...))); eval() turns off nn.Transformer's fixed dropout 0.1."""
    name = "word_language_model Transformer"

    def build(self, mod, side, data):
        return mod.TransformerModel(data["vocab"], 64, 2, 64, 2, dropout=0.0)

    def mode(self, model):
        model.eval()

    def forward(self, model, x, state):
        return model(x).view(-1, self.data["vocab"])


class WordTransformerLR1(WordTransformer):
    """The same at lr 1: main.py's lr 20 makes the Transformer's loss climb (8.8 -> 28 in 20
    steps, in torch's own main.py too), where float32 rounding is amplified chaotically."""
    name, lr = "word_language_model Transformer lr 1", 1.0


PROGRAMS = {"nanogpt": NanoGPT, "gpt": LectureGPT, "lstm": WordLSTM,
            "transformer": WordTransformer, "transformer_lr1": WordTransformerLR1}
