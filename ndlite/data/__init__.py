"""Data: Dataset, TensorDataset, Subset, ConcatDataset, random_split, DataLoader (samplers,
collate_fn, worker processes), and the MNIST digits (IDX reader, download with SHA-256
checks, and a small real subset bundled with the package), and character-level text for
language models (CharText, with a bundled sample of tiny shakespeare). Also importable as
`ndlite.utils.data`, like torch.utils.data."""

from .collate import default_collate
from .dataloader import DataLoader
from .dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split
from .mnist import MNIST, MNISTError
from .sampler import BatchSampler, DistributedSampler
from .text import CharText

__all__ = ["BatchSampler", "CharText", "ConcatDataset", "DataLoader", "Dataset",
           "DistributedSampler", "MNIST", "MNISTError", "Subset", "TensorDataset",
           "default_collate", "random_split"]
