"""Grad mode and the `using(...)` backend stack are per thread, as in PyTorch."""

import threading

import ndlite


def _in_thread(fn):
    result = {}

    def run():
        result["value"] = fn()

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return result["value"]


def test_no_grad_in_one_thread_leaves_recording_on_in_another():
    x = ndlite.ones(3, requires_grad=True)
    inside, outside = threading.Event(), threading.Event()
    seen = {}

    def quiet():
        with ndlite.no_grad():
            seen["quiet"] = (x * 2).requires_grad
            inside.set()
            outside.wait(timeout=10)  # stay inside no_grad while the other thread records

    def recording():
        inside.wait(timeout=10)
        seen["recording"] = (x * 2).requires_grad
        seen["mode"] = ndlite.is_grad_enabled()
        outside.set()

    threads = [threading.Thread(target=quiet), threading.Thread(target=recording)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"quiet": False, "recording": True, "mode": True}
    assert ndlite.is_grad_enabled()


def test_a_new_thread_starts_with_grad_on_even_inside_no_grad():
    with ndlite.no_grad():
        assert _in_thread(ndlite.is_grad_enabled) is True
        assert not ndlite.is_grad_enabled()


def test_using_is_per_thread():
    default = ndlite.current_backend()
    fake = ndlite.get_backend("numpy")
    with ndlite.using(fake):
        assert _in_thread(ndlite.current_backend) is default
        assert ndlite.current_backend() is fake
