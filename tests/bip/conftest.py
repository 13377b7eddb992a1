"""One compute thread for the bip tests (torch and faiss's OpenMP pool), restored afterwards.

On the shared, oversubscribed 2-core box OpenMP workers spin against other jobs: the allocator tests ran
~10x slower with the default pools than with one thread. Results do not depend on this (every test seeds
its own generators); it only keeps the default tests within their time budget."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_compute_thread():
    n = torch.get_num_threads()
    try:
        import faiss
        nf = faiss.omp_get_max_threads()
    except ImportError:
        faiss, nf = None, None
    torch.set_num_threads(1)
    if faiss is not None:
        faiss.omp_set_num_threads(1)
    yield
    torch.set_num_threads(n)
    if faiss is not None:
        faiss.omp_set_num_threads(nf)
