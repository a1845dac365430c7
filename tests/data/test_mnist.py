"""The MNIST reader: the bundled subset, gz and raw IDX files, clear errors for missing,
truncated and corrupt files, and (when ../shared/data/mnist exists) the full set."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from ndlite.data import MNIST, MNISTError
from ndlite.data.mnist import FILES, SHA256

FULL = Path(__file__).resolve().parents[3] / "shared" / "data" / "mnist"


def _write_idx(folder: Path, split: str, images: np.ndarray, labels: np.ndarray, gz: bool):
    for kind, array, magic in (("images", images, 2051), ("labels", labels, 2049)):
        data = magic.to_bytes(4, "big") + b"".join(n.to_bytes(4, "big") for n in array.shape)
        data += array.astype(np.uint8).tobytes()
        name = FILES[(split, kind)]
        if gz:
            (folder / (name + ".gz")).write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)


def test_bundled_subset_is_real_balanced_mnist():
    train, test = MNIST.bundled(True), MNIST.bundled(False)
    assert len(train) == 6000 and len(test) == 1000
    assert np.bincount(train.labels).tolist() == [600] * 10
    assert train.images.shape == (6000, 28, 28) and train.images.dtype == np.uint8
    images, labels = train.batch(np.arange(256))
    assert images.shape == (256, 1, 28, 28) and images.dtype == np.float32
    assert labels.dtype == np.int64
    assert abs(float(images.mean())) < 0.3  # normalized with MNIST's mean and std


@pytest.mark.parametrize("gz", [True, False])
def test_reads_gz_and_raw_idx(tmp_path, gz):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (5, 28, 28))
    labels = np.array([3, 1, 4, 1, 5])
    _write_idx(tmp_path, "test", images, labels, gz)
    ds = MNIST(tmp_path, train=False)
    assert ds.images.tolist() == images.tolist() and ds.labels.tolist() == labels.tolist()


def test_missing_files_say_what_to_do(tmp_path):
    with pytest.raises(MNISTError, match="not found.*download=True.*bundled"):
        MNIST(tmp_path)


def test_truncated_file(tmp_path):
    _write_idx(tmp_path, "test", np.zeros((5, 28, 28)), np.zeros(5), gz=False)
    path = tmp_path / FILES[("test", "images")]
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(MNISTError, match="truncated"):
        MNIST(tmp_path, train=False)


def test_truncated_gzip(tmp_path):
    _write_idx(tmp_path, "test", np.zeros((5, 28, 28)), np.zeros(5), gz=True)
    path = tmp_path / (FILES[("test", "labels")] + ".gz")
    path.write_bytes(path.read_bytes()[:15])
    with pytest.raises(MNISTError, match="truncated or corrupt"):
        MNIST(tmp_path, train=False)


def test_wrong_magic_and_bad_labels(tmp_path):
    _write_idx(tmp_path, "test", np.zeros((5, 28, 28)), np.array([0, 1, 2, 3, 12]), gz=False)
    with pytest.raises(MNISTError, match="corrupt: found label 12"):
        MNIST(tmp_path, train=False)
    images = tmp_path / FILES[("test", "images")]
    labels = tmp_path / FILES[("test", "labels")]
    images.write_bytes(labels.read_bytes())
    with pytest.raises(MNISTError, match="not an IDX images file"):
        MNIST(tmp_path, train=False)


def test_the_published_checksums_are_known():
    assert set(SHA256) == set(FILES.values()) and all(len(h) == 64 for h in SHA256.values())


@pytest.mark.skipif(not FULL.is_dir(), reason="full MNIST not found at ../shared/data/mnist")
def test_full_mnist_checks_out():
    train, test = MNIST(FULL), MNIST(FULL, train=False)  # SHA-256 verified while reading
    assert len(train) == 60000 and len(test) == 10000
    assert np.bincount(test.labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028,
                                                 974, 1009]


def test_download_checks_sha256(tmp_path, monkeypatch):
    """`download=True` against a local mirror (file:// URLs): accepted when the SHA-256 of the
    uncompressed file matches, refused (and nothing written) when it does not."""
    import hashlib

    from ndlite.data import mnist

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    rng = np.random.default_rng(1)
    _write_idx(mirror, "train", rng.integers(0, 256, (4, 28, 28)), np.arange(4), gz=True)
    _write_idx(mirror, "test", rng.integers(0, 256, (2, 28, 28)), np.arange(2), gz=True)
    digests = {name: hashlib.sha256(gzip.decompress((mirror / (name + ".gz")).read_bytes()))
               .hexdigest() for name in FILES.values()}
    monkeypatch.setattr(mnist, "SHA256", digests)
    monkeypatch.setattr(mnist, "MIRRORS", (mirror.as_uri() + "/",))
    cache = tmp_path / "cache"
    assert len(MNIST(cache, train=False, download=True)) == 2
    assert sorted(p.name for p in cache.iterdir()) == sorted(n + ".gz" for n in FILES.values())
    digests["train-images-idx3-ubyte"] = "0" * 64
    other = tmp_path / "other"
    with pytest.raises(MNISTError, match="SHA-256 .* does not match"):
        MNIST(other, train=True, download=True)
    assert not (other / "train-images-idx3-ubyte.gz").exists()
