"""Data: Dataset, TensorDataset, DataLoader, and the MNIST digits (IDX reader, download with
SHA-256 checks, and a small real subset bundled with the package)."""

from .dataloader import DataLoader
from .dataset import Dataset, TensorDataset
from .mnist import MNIST, MNISTError
from .sampler import DistributedSampler

__all__ = ["DataLoader", "Dataset", "DistributedSampler", "MNIST", "MNISTError",
           "TensorDataset"]
