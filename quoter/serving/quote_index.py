"""Quote vectors in faiss, searched by inner product: exact by default, or approximate (IVF) by setting.

Every vector carries its quote's id, so ids stay stable while quotes are added and removed. A copy of
the vectors is kept beside faiss as well, for the softmax normaliser over the full quote set: computed
from every score with the exact index, estimated from a fixed sample of quotes with IVF (IndexConfig).
That copy grows by a quarter at a time, so adding a quote costs the same however many there are.
"""

from __future__ import annotations

import hashlib
import math
import threading

import faiss
import numpy as np
import torch

from quoter.errors import QuoterError
from quoter.serving.index_config import IndexConfig, IndexKind

# faiss warns below 39 training points per cluster; fewer clusters beat badly placed ones.
POINTS_PER_CLUSTER = 39
GROWTH_MIN = 64  # rows of spare room added at least when the copy of the vectors grows


def ivf_clusters(config: IndexConfig, quotes: int) -> int:
    """How many IVF clusters to train for this many quotes."""
    wanted = config.nlist or int(4 * math.sqrt(max(quotes, 1)))
    return max(1, min(wanted, quotes // POINTS_PER_CLUSTER))


def _empty_index(dim: int, config: IndexConfig, training: np.ndarray) -> faiss.Index:
    if config.kind is IndexKind.EXACT:
        return faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    if len(training) == 0:
        raise QuoterError("an approximate (IVF) index needs at least one quote to train on")
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, ivf_clusters(config, len(training)), faiss.METRIC_INNER_PRODUCT)
    index.train(training)
    # IVF takes ids natively; a hash table from id to list entry lets quotes be removed by id.
    index.set_direct_map_type(faiss.DirectMap.Hashtable)
    index.nprobe = config.nprobe
    return index


def gpu_available() -> bool:
    """Whether this faiss build can search on a GPU and sees one."""
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


class QuoteIndex:
    """Quote vectors by id, searched by inner product. Safe to use from several threads."""

    def __init__(
        self,
        ids: np.ndarray,
        vectors: np.ndarray,
        config: IndexConfig = IndexConfig(),
    ) -> None:
        """Index `vectors` (n, dim) under `ids` (n,), which must be distinct."""
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(ids) != len(vectors):
            raise ValueError(f"{len(ids)} ids for vectors of shape {vectors.shape}")
        if len(np.unique(ids)) != len(ids):
            raise ValueError("quote ids must be distinct")
        self.config = config
        self.dim = vectors.shape[1]
        self._lock = threading.RLock()
        self._size = len(ids)
        self._id_rows = np.array(ids)  # the ids, then spare room
        self._vector_rows = np.array(vectors)  # the vectors in the ids' order, then spare room
        self._known = set(ids.tolist())
        self._cpu = _empty_index(self.dim, config, vectors)
        self._cpu.add_with_ids(vectors, ids)
        self._gpu_resources = faiss.StandardGpuResources() if config.gpu and gpu_available() else None
        self._search_index = self._for_search()
        self._sample_rows = self._draw_sample()

    @property
    def _ids(self) -> np.ndarray:
        return self._id_rows[: self._size]

    @property
    def _vectors(self) -> np.ndarray:
        return self._vector_rows[: self._size]

    def _exact_normalizer(self) -> bool:
        return self.config.kind is IndexKind.EXACT or len(self._ids) <= self.config.normalizer_sample

    def _draw_sample(self) -> np.ndarray:
        """Rows of the quotes that stand for all others in the IVF normaliser, drawn again after each change
        (seeded, so that the same quote set gives the same probabilities)."""
        if self._exact_normalizer():
            return np.zeros(0, dtype=np.int64)
        rng = np.random.default_rng(len(self._ids))
        return np.sort(rng.choice(len(self._ids), self.config.normalizer_sample, replace=False))

    def _for_search(self) -> faiss.Index:
        """The CPU index, or a copy of it on the GPU (faiss cannot remove ids from GPU indexes, so the
        CPU index stays the one that changes and the copy is refreshed after each change)."""
        if self._gpu_resources is None:
            return self._cpu
        return faiss.index_cpu_to_gpu(self._gpu_resources, 0, self._cpu)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def on_gpu(self) -> bool:
        """Whether searches run on a GPU."""
        return self._search_index is not self._cpu

    def set_nprobe(self, nprobe: int) -> None:
        """Search this many IVF clusters per query from now on (more: better recall, slower)."""
        ivf = faiss.try_extract_index_ivf(self._cpu)
        if ivf is None:
            raise QuoterError("nprobe applies to an approximate (IVF) index only")
        with self._lock:
            ivf.nprobe = nprobe
            self._search_index = self._for_search()

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Index more vectors under new ids."""
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        with self._lock:
            if self._known.intersection(ids.tolist()) or len(np.unique(ids)) != len(ids):
                raise ValueError("quote ids must be distinct")
            self._cpu.add_with_ids(vectors, ids)
            end = self._size + len(ids)
            if end > len(self._id_rows):
                capacity = max(end, len(self._id_rows) + len(self._id_rows) // 4 + GROWTH_MIN)
                self._id_rows = _grown(self._id_rows, capacity)
                self._vector_rows = _grown(self._vector_rows, capacity)
            self._id_rows[self._size : end] = ids
            self._vector_rows[self._size : end] = vectors
            self._size = end
            self._known.update(ids.tolist())
            self._search_index = self._for_search()
            self._sample_rows = self._draw_sample()

    def remove(self, ids: np.ndarray) -> int:
        """Remove vectors by id; return how many were indexed."""
        ids = np.asarray(ids, dtype=np.int64)
        with self._lock:
            removed = int(self._cpu.remove_ids(ids))
            keep = ~np.isin(self._ids, ids)
            kept = int(keep.sum())
            self._id_rows[:kept] = self._ids[keep]
            self._vector_rows[:kept] = self._vectors[keep]
            self._size = kept
            self._known.difference_update(ids.tolist())
            self._search_index = self._for_search()
            self._sample_rows = self._draw_sample()
            return removed

    def fingerprint(self) -> str:
        """A hash of the ids and their vectors, whatever order they were added in."""
        with self._lock:
            order = np.argsort(self._ids)
            digest = hashlib.sha256(self._ids[order].tobytes())
            digest.update(self._vectors[order].tobytes())
        return digest.hexdigest()

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The top `k` quotes of each query, best first: (scores, ids) of shape (queries, k') with
        k' = min(k, quotes), and the log of each query's softmax normaliser over ALL quotes (queries,), an
        estimate with IVF (see IndexConfig). An approximate index may find fewer than k' quotes; the missing
        places have id -1."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        with self._lock:
            k = min(k, len(self._ids))
            if k == 0:
                empty = np.zeros((len(queries), 0))
                return empty.astype(np.float32), empty.astype(np.int64), np.full(len(queries), -np.inf)
            if self._exact_normalizer():
                scores, ids = self._search_index.search(queries, k)
                # torch, not numpy: its thread count is the one the server sets (numpy's BLAS takes every core).
                full = torch.from_numpy(queries) @ torch.from_numpy(self._vectors).T
                return scores, ids, torch.logsumexp(full.double(), dim=1).numpy()
            head = min(max(k, self.config.normalizer_head), len(self._ids))
            scores, ids = self._search_index.search(queries, head)
            log_normalizers = self._estimated_log_normalizers(queries, scores, ids)
        return scores[:, :k], ids[:, :k], log_normalizers

    def _estimated_log_normalizers(
        self, queries: np.ndarray, head_scores: np.ndarray, head_ids: np.ndarray
    ) -> np.ndarray:
        """log sum exp(score) over all quotes: the found head exactly, plus the other quotes' sum estimated
        as their number times the mean exp(score) of the sampled quotes that are not in the head."""
        sample_ids = self._ids[self._sample_rows]
        sample_scores = (torch.from_numpy(queries) @ torch.from_numpy(self._vectors[self._sample_rows]).T).double()
        found = head_ids >= 0
        in_head = torch.from_numpy(np.stack([np.isin(sample_ids, row[row >= 0]) for row in head_ids]))
        others = (~in_head).sum(dim=1)
        rest_mean = torch.logsumexp(sample_scores.masked_fill(in_head, -np.inf), dim=1) - torch.log(others.double())
        rest_count = torch.from_numpy(len(self._ids) - found.sum(axis=1)).double()
        head = torch.from_numpy(np.where(found, head_scores, -np.inf)).double()
        rest = torch.where(rest_count > 0, rest_mean + torch.log(rest_count), torch.full_like(rest_mean, -np.inf))
        return torch.logaddexp(torch.logsumexp(head, dim=1), rest).numpy()


def _grown(rows: np.ndarray, capacity: int) -> np.ndarray:
    """`rows` copied into an array with room for `capacity` rows."""
    grown = np.empty((capacity, *rows.shape[1:]), dtype=rows.dtype)
    grown[: len(rows)] = rows
    return grown


def recall_at_k(vectors: np.ndarray, queries: np.ndarray, config: IndexConfig, k: int = 10) -> float:
    """The share of the exact top `k` that an index built with `config` finds, averaged over queries."""
    ids = np.arange(len(vectors))
    _, exact, _ = QuoteIndex(ids, vectors, IndexConfig(gpu=config.gpu)).search(queries, k)
    _, found, _ = QuoteIndex(ids, vectors, config).search(queries, k)
    hits = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(exact, found))
    return hits / exact.size if exact.size else 1.0
