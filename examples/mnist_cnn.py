"""Train a small CNN on the MNIST subset bundled with ndlite, PyTorch-style.

    python examples/mnist_cnn.py            # NumPy backend; NDLITE_BACKEND=cupy or opencl also work

The same loop as `ndlite train mnist`, written out: a model from ndlite.nn, an optimizer from
ndlite.optim, batches from ndlite.data, a checkpoint with ndlite.save.
"""

import os
import tempfile

import ndlite
from ndlite import nn
from ndlite.data import MNIST, DataLoader
from ndlite.nn import functional as F

ndlite.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(512, 10),
)
optimizer = ndlite.optim.Adam(model.parameters(), lr=2e-3)
train = DataLoader(MNIST.bundled(train=True), batch_size=64, shuffle=True, seed=0)
test = DataLoader(MNIST.bundled(train=False), batch_size=500)

for epoch in range(2):
    model.train()
    for images, labels in train:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    model.eval()
    correct = 0
    with ndlite.no_grad():
        for images, labels in test:
            correct += int((model(images).argmax(dim=1) == labels).sum().item())
    print(f"epoch {epoch + 1}: last batch loss {loss.item():.3f}, "
          f"test accuracy {100 * correct / len(test.dataset):.1f}%")

path = os.path.join(tempfile.gettempdir(), "mnist_cnn.npz")
ndlite.save({"model": model.state_dict()}, path)
print(f"saved {path}")
