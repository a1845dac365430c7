"""Logistic regression on synthetic data, written with ndlite tensors and autograd only.

Two Gaussian blobs in 2-D; a linear model trained by gradient descent on the mean binary
cross-entropy. Prints the loss going down and the final accuracy.

    NDLITE_BACKEND=numpy python examples/logistic_regression.py
"""

import ndlite

ndlite.manual_seed(0)
n = 512
labels = (ndlite.rand(n) < 0.5).float()
centers = ndlite.stack([labels * 2 - 1, (labels * 2 - 1) * 0.5], dim=1)  # (n, 2)
x = centers + ndlite.randn(n, 2) * 0.8

w = ndlite.zeros(2, requires_grad=True)
b = ndlite.zeros((), requires_grad=True)
print(f"logistic regression on {n} points, backend {x.device}")
for step in range(201):
    logits = x @ w + b
    # BCE with logits, stable form: max(z, 0) - z*y + log(1 + exp(-|z|))
    loss = (logits.clamp(min=0) - logits * labels + (-logits.abs()).exp().add(1).log()).mean()
    loss.backward()
    with ndlite.no_grad():
        w -= w.grad * 0.5
        b -= b.grad * 0.5
    w.grad = b.grad = None
    if step % 40 == 0:
        print(f"step {step:3d}  loss {loss.item():.4f}")
accuracy = ((x @ w + b > 0).float() == labels).float().mean().item()
print(f"accuracy {accuracy:.3f}  weights {w.tolist()}  bias {b.item():.3f}")
