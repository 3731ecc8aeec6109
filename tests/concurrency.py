"""Running one piece of test work on several threads at once."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_on_threads(work: Callable[[int], None], count: int, timeout: float = 120.0) -> None:
    """Call ``work(i)`` for i in range(count), each on its own thread, started together;
    re-raise the first failure; fail if a thread is still running after ``timeout``."""
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def guarded(index: int) -> None:
        try:
            start.wait(timeout=timeout)
            work(index)
        except BaseException as error:  # noqa: BLE001 - re-raised below
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish"
    if errors:
        raise errors[0]
