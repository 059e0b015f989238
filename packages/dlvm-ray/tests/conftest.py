"""One Ray instance for the tests of this package (starting one takes seconds), with more
logical CPUs than this machine's cores so that three workers fit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_instance() -> Iterator[None]:
    import logging

    import ray

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    yield
    ray.shutdown()
