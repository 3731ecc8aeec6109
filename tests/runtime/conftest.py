"""Fixtures of the runtime tests."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

import acl
from ge.runtime.device import set_device


@pytest.fixture(autouse=True)
def clean_runtime() -> Iterator[None]:
    """Each test ends with no acl.init outstanding (so acl's streams are closed) and with
    cpu:0 current."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while acl.init_count():
            acl.finalize()
    set_device(0)
