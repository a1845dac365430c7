"""ndlite/bounds.py: class targets and embedding indices made from host data are checked
without reading the device back (a GPU synchronization each), and every other case is still
read and checked: tensors computed on the device, changed in place, out-of-range values.
Run on a device backend (OpenCL; PoCL in CI): the NumPy backend reads for free and keeps no
ranges."""

import numpy as np
import pytest

import ndlite
import ndlite.nn.functional as F
from ndlite.device.registry import probe

DEVICE = next((b for b in (probe("opencl")[0], probe("cupy")[0]) if b is not None), None)
pytestmark = pytest.mark.skipif(DEVICE is None, reason="no device backend (opencl or cupy)")


@pytest.fixture
def reads(monkeypatch):
    """How often the device backend's buffers are read back to the host."""
    count = []
    original = DEVICE.to_numpy
    monkeypatch.setattr(DEVICE, "to_numpy", lambda x: count.append(x.shape) or original(x))
    return count


def _logits(n=6, classes=5):
    return ndlite.tensor(np.random.default_rng(0).standard_normal((n, classes)),
                         dtype=ndlite.float32, backend=DEVICE)


def test_targets_from_host_data_are_not_read_back(reads):
    target = ndlite.tensor([0, 4, 2, 1, 3, 0], backend=DEVICE)
    loss = F.cross_entropy(_logits(), target)
    F.nll_loss(_logits(), target.reshape(2, 3).reshape(6))  # views of it too
    assert reads == []
    expected = F.cross_entropy(_logits().to("numpy"), target.to("numpy"))
    np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-6)


def test_out_of_range_targets_still_raise_the_same_error(reads):
    with pytest.raises(IndexError, match="target 5 is out of bounds for 5 classes"):
        F.cross_entropy(_logits(), ndlite.tensor([0, 5, 2, 1, 3, 0], backend=DEVICE))
    with pytest.raises(IndexError, match="target -2 is out of bounds"):
        F.nll_loss(_logits(), ndlite.tensor([0, -2, 2, 1, 3, 0], backend=DEVICE))
    # ignore_index is allowed outside [0, C): read back, then accepted
    F.nll_loss(_logits(), ndlite.tensor([0, -100, 2, 1, 3, 0], backend=DEVICE))
    assert len(reads) == 3


def test_a_target_changed_in_place_or_computed_on_the_device_is_read(reads):
    target = ndlite.tensor([0, 4, 2, 1, 3, 0], backend=DEVICE)
    target[1] = 7  # an in-place write: the recorded range no longer holds
    with pytest.raises(IndexError, match="target 7 is out of bounds"):
        F.cross_entropy(_logits(), target)
    computed = ndlite.tensor([0, 4, 2, 1, 3, 0], backend=DEVICE) + 3  # values from the device
    with pytest.raises(IndexError, match="target 7 is out of bounds"):
        F.cross_entropy(_logits(), computed)
    assert len(reads) == 2


def test_embedding_indices_and_arange_positions_are_not_read_back(reads):
    weight = ndlite.tensor(np.arange(12.0).reshape(4, 3), dtype=ndlite.float32, backend=DEVICE)
    tokens = ndlite.tensor([[3, 0], [1, 2]], backend=DEVICE)
    out = F.embedding(tokens, weight)
    positions = F.embedding(ndlite.arange(4, backend=DEVICE), weight)
    assert reads == []
    np.testing.assert_array_equal(out.numpy(), np.arange(12.0).reshape(4, 3)[[[3, 0], [1, 2]]])
    np.testing.assert_array_equal(positions.numpy(), np.arange(12.0).reshape(4, 3))
    with pytest.raises(IndexError, match="index out of range: values from 0 to 4"):
        F.embedding(ndlite.arange(5, backend=DEVICE), weight)


def test_aliases_exports_and_collectives_forget_the_range(reads):
    """A tensor whose memory another tensor now shares (set_, .data =), or that was exported
    through DLPack, can change without its version counting it: its range is not trusted."""
    from ndlite import bounds

    for alias in ("set_", "data", "dlpack"):
        target = ndlite.tensor([0, 4, 2, 1, 3, 0], backend=DEVICE)
        assert bounds.known(target) == (0, 4)
        other = ndlite.tensor([1, 1, 1, 1, 1, 1], backend=DEVICE)
        if alias == "set_":
            other.set_(target)
        elif alias == "data":
            other.data = target
        else:
            try:
                target.__dlpack__()
            except BufferError:  # a backend that exports only a copy: forgotten all the same
                pass
        assert bounds.known(target) is None, alias
        if alias != "dlpack":
            other[1] = 9  # through the alias: target's version does not count it
            with pytest.raises(IndexError, match="target 9 is out of bounds"):
                F.cross_entropy(_logits(), target)
