"""MNIST: the handwritten digits, read from the standard IDX files (gzip-compressed or raw).

Where the files come from, in order: `root=` if given, else `$NDLITE_DATA_DIR`, else the
cache `~/.cache/ndlite/mnist` (`download=True` fills it, checking each file's SHA-256).
`MNIST.bundled(train)` reads the small real subset that ships inside the package (built by
tools/make_mnist_subset.py), so demos and tests run offline. A missing, truncated or corrupt
file raises `MNISTError` saying which file and what to do.

Samples are (image, label): a float32 image (1, 28, 28) normalized with the training set's
mean and standard deviation (as PyTorch's MNIST examples do), and an int64 label.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import urllib.request
from pathlib import Path

import numpy as np

from ..creation import tensor
from .dataset import Dataset

FILES = {
    ("train", "images"): "train-images-idx3-ubyte",
    ("train", "labels"): "train-labels-idx1-ubyte",
    ("test", "images"): "t10k-images-idx3-ubyte",
    ("test", "labels"): "t10k-labels-idx1-ubyte",
}
#: SHA-256 of the uncompressed standard files
SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
#: where `download=True` looks, in order (each serves the four .gz files)
MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
)
MEAN, STD = 0.1307, 0.3081
BUNDLED = Path(__file__).with_name("mnist_subset")
ENV_VAR = "NDLITE_DATA_DIR"
_MAGIC = {"images": 2051, "labels": 2049}


class MNISTError(RuntimeError):
    """A missing, truncated or corrupt MNIST file (the message says which and what to do)."""


def default_root() -> Path:
    """$NDLITE_DATA_DIR, or the cache ~/.cache/ndlite/mnist."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ndlite" / "mnist"


def _fix_hint(root: Path) -> str:
    return (f"put the four MNIST IDX files (gz or raw) in {root}, point --data-dir / "
            f"{ENV_VAR} at a folder holding them, pass download=True when online, or use the "
            "bundled subset (MNIST.bundled(), `ndlite train mnist --subset`)")


def find_file(root: Path, name: str) -> Path | None:
    for candidate in (root / name, root / (name + ".gz")):
        if candidate.is_file():
            return candidate
    return None


def read_bytes(path: Path) -> bytes:
    """The uncompressed bytes of an IDX file (gzip is detected by its magic bytes)."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        if head == b"\x1f\x8b":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise MNISTError(f"MNIST file {path} is truncated or corrupt ({exc}); delete it and "
                         "download it again") from None


def parse_idx(data: bytes, kind: str, source: str) -> np.ndarray:
    """An IDX payload as a uint8 array: (n, rows, cols) images or (n,) labels."""
    ndim = 3 if kind == "images" else 1
    header = 4 + 4 * ndim
    magic = int.from_bytes(data[:4], "big") if len(data) >= 4 else None
    if magic is not None and magic != _MAGIC[kind]:
        raise MNISTError(f"MNIST file {source} is not an IDX {kind} file (magic number {magic},"
                         f" expected {_MAGIC[kind]}); check the file names")
    if len(data) < header:
        raise MNISTError(f"MNIST file {source} is truncated: {len(data)} bytes, less than its "
                         f"{header}-byte header; delete it and download it again")
    dims = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    expected = header + int(np.prod(dims))
    if len(data) != expected:
        state = "truncated" if len(data) < expected else "too long"
        raise MNISTError(f"MNIST file {source} is {state}: {len(data)} bytes where its header "
                         f"{dims} needs {expected}; delete it and download it again")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def download_files(root: Path, names=None, mirrors=None) -> None:
    """Fetch the standard .gz files into `root` (from `mirrors`, default MIRRORS), verifying
    each file's SHA-256."""
    mirrors = MIRRORS if mirrors is None else mirrors
    root.mkdir(parents=True, exist_ok=True)
    for name in names or SHA256:
        if find_file(root, name) is not None:
            continue
        errors = []
        for mirror in mirrors:
            url = mirror + name + ".gz"
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    blob = response.read()
                raw = gzip.decompress(blob)
            except (OSError, EOFError, gzip.BadGzipFile) as exc:
                errors.append(f"{url}: {exc}")
                continue
            digest = hashlib.sha256(raw).hexdigest()
            if digest != SHA256[name]:
                errors.append(f"{url}: SHA-256 {digest} does not match {SHA256[name]}")
                continue
            tmp = root / (name + ".gz.part")
            tmp.write_bytes(blob)
            tmp.replace(root / (name + ".gz"))
            break
        else:
            raise MNISTError(f"could not download {name}: " + "; ".join(errors) +
                             f". {_fix_hint(root)}")


def load_split(root: Path, split: str, verify: bool = True) -> tuple:
    """(images uint8 (n, 28, 28), labels uint8 (n,)) of "train" or "test" from `root`."""
    out = []
    for kind in ("images", "labels"):
        name = FILES[(split, kind)]
        path = find_file(root, name)
        if path is None:
            raise MNISTError(f"MNIST {split} {kind} not found: no {name} or {name}.gz in "
                             f"{root}. {_fix_hint(root)}")
        data = read_bytes(path)
        array = parse_idx(data, kind, str(path))
        full = array.shape[0] in (60000, 10000)
        if verify and full and hashlib.sha256(data).hexdigest() != SHA256[name]:
            raise MNISTError(f"MNIST file {path} is corrupt: its SHA-256 does not match the "
                             "published one; delete it and download it again")
        out.append(array)
    images, labels = out
    if len(images) != len(labels):
        raise MNISTError(f"MNIST {split} files in {root} disagree: {len(images)} images but "
                         f"{len(labels)} labels")
    if labels.size and labels.max() > 9:
        raise MNISTError(f"MNIST {split} labels in {root} are corrupt: found label "
                         f"{int(labels.max())}")
    return images, labels


class MNIST(Dataset):
    """The MNIST digits as a Dataset of (image (1, 28, 28) float32, label int64).

    >>> import ndlite
    >>> test = ndlite.data.MNIST.bundled(train=False)
    >>> image, label = test[0]
    >>> image.shape, label.dtype
    ((1, 28, 28), dtype('int64'))
    """

    def __init__(self, root=None, train: bool = True, download: bool = False,
                 limit: int | None = None, verify: bool = True):
        self.root = Path(root) if root is not None else default_root()
        self.train = train
        split = "train" if train else "test"
        if download:
            download_files(self.root)
        images, labels = load_split(self.root, split, verify)
        if limit is not None:
            images, labels = images[:limit], labels[:limit]
        self.images, self.labels = images, labels

    @classmethod
    def bundled(cls, train: bool = True) -> MNIST:
        """The subset that ships with ndlite (see tools/make_mnist_subset.py)."""
        return cls(BUNDLED, train=train)

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, indices) -> tuple:
        """Images (n, 1, 28, 28) float32, normalized, and labels (n,) int64."""
        images = self.images[indices].astype(np.float32)
        images = (images * np.float32(1 / 255) - np.float32(MEAN)) * np.float32(1 / STD)
        return images[:, None], self.labels[indices].astype(np.int64)

    def __getitem__(self, index):
        images, labels = self.batch(np.asarray([index]))
        return tensor(images[0]), tensor(labels[0])

    def __repr__(self) -> str:
        return (f"MNIST({'train' if self.train else 'test'}, {len(self)} digits, "
                f"root={str(self.root)!r})")
