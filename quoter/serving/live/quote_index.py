"""Quote vectors by id, searched by inner product: exact by default, or approximate (IVF, faiss) by setting.

Every vector carries its quote's id, so ids stay stable while quotes are added and removed. The vectors are
kept once, in id-insertion order, as the columns of one float32 matrix (dim, quotes) that grows by a quarter
at a time (so adding a quote costs the same however many there are). Columns rather than rows: a query times
that matrix reads it in memory order, which for one query on a CPU (MKL) took a third of the time of the
same product over a row matrix transposed (5 vs 15 ms for 100,000 quotes), with the same scores up to float
rounding (as batching changes them too); from 8 queries on, both take the same time. Exact search scores
every quote with one matrix product and takes both the top k and the softmax normaliser over the full quote
set from those scores. IVF search runs in faiss, which holds a second copy in its clusters; its normaliser
is estimated from the matrix's columns of a fixed sample of quotes (IndexConfig).
"""

from __future__ import annotations

import hashlib
import math
import threading

import faiss
import numpy as np
import torch

from quoter.errors import QuoterError
from quoter.serving.live.index_config import IndexConfig, IndexKind

# faiss warns below 39 training points per cluster; fewer clusters beat badly placed ones.
POINTS_PER_CLUSTER = 39
GROWTH_MIN = 64  # rows of spare room added at least when the vectors' matrix grows


def ivf_clusters(config: IndexConfig, quotes: int) -> int:
    """How many IVF clusters to train for this many quotes."""
    wanted = config.nlist or int(4 * math.sqrt(max(quotes, 1)))
    return max(1, min(wanted, quotes // POINTS_PER_CLUSTER))


def _ivf_index(dim: int, config: IndexConfig, training: np.ndarray) -> faiss.Index:
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
        self._vector_columns = np.ascontiguousarray(vectors.T)  # the vectors in the ids' order, then spare room
        self._known = set(ids.tolist())
        self._ivf = None
        self._gpu_resources = None
        if config.kind is IndexKind.IVF:
            self._ivf = _ivf_index(self.dim, config, vectors)
            self._ivf.add_with_ids(vectors, ids)
            self._gpu_resources = faiss.StandardGpuResources() if config.gpu and gpu_available() else None
        # Exact search multiplies on the GPU when torch sees one (the matrix is copied there after each change).
        self._device = torch.device("cuda" if config.gpu and torch.cuda.is_available() else "cpu")
        self._refresh()

    @property
    def _ids(self) -> np.ndarray:
        return self._id_rows[: self._size]

    @property
    def _vectors(self) -> np.ndarray:
        """The vectors as rows (quotes, dim): a view of the columns."""
        return self._vector_columns[:, : self._size].T

    def _refresh(self) -> None:
        """Make what searches read follow the vectors after a change: the exact matrix on its device, the IVF
        index (faiss cannot remove ids from GPU indexes, so the CPU index is the one that changes and its GPU
        copy is made again), and the normaliser's sample."""
        self._search_columns = torch.from_numpy(self._vector_columns[:, : self._size]).to(self._device)
        if self._ivf is not None and self._gpu_resources is not None:
            self._search_ivf = faiss.index_cpu_to_gpu(self._gpu_resources, 0, self._ivf)
        else:
            self._search_ivf = self._ivf
        self._sample_rows = self._draw_sample()

    def _exact_normalizer(self) -> bool:
        return self._ivf is None or len(self._ids) <= self.config.normalizer_sample

    def _draw_sample(self) -> np.ndarray:
        """Rows of the quotes that stand for all others in the IVF normaliser, drawn again after each change
        (seeded, so that the same quote set gives the same probabilities)."""
        if self._exact_normalizer():
            return np.zeros(0, dtype=np.int64)
        rng = np.random.default_rng(len(self._ids))
        return np.sort(rng.choice(len(self._ids), self.config.normalizer_sample, replace=False))

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def on_gpu(self) -> bool:
        """Whether searches run on a GPU."""
        return self._search_ivf is not self._ivf if self._ivf is not None else self._device.type == "cuda"

    def set_nprobe(self, nprobe: int) -> None:
        """Search this many IVF clusters per query from now on (more: better recall, slower)."""
        if self._ivf is None:
            raise QuoterError("nprobe applies to an approximate (IVF) index only")
        with self._lock:
            self._ivf.nprobe = nprobe
            self._refresh()

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Index more vectors under new ids."""
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        with self._lock:
            if self._known.intersection(ids.tolist()) or len(np.unique(ids)) != len(ids):
                raise ValueError("quote ids must be distinct")
            if self._ivf is not None:
                self._ivf.add_with_ids(vectors, ids)
            end = self._size + len(ids)
            if end > len(self._id_rows):
                capacity = max(end, len(self._id_rows) + len(self._id_rows) // 4 + GROWTH_MIN)
                self._id_rows = _grown(self._id_rows, capacity)
                columns = np.empty((self.dim, capacity), dtype=np.float32)
                columns[:, : self._size] = self._vector_columns[:, : self._size]
                self._vector_columns = columns
            self._id_rows[self._size : end] = ids
            self._vector_columns[:, self._size : end] = vectors.T
            self._size = end
            self._known.update(ids.tolist())
            self._refresh()

    def remove(self, ids: np.ndarray) -> int:
        """Remove vectors by id; return how many were indexed."""
        ids = np.asarray(ids, dtype=np.int64)
        with self._lock:
            if self._ivf is not None:
                self._ivf.remove_ids(ids)
            keep = ~np.isin(self._ids, ids)
            kept = int(keep.sum())
            removed = self._size - kept
            self._id_rows[:kept] = self._ids[keep]
            self._vector_columns[:, :kept] = self._vectors[keep].T
            self._size = kept
            self._known.difference_update(ids.tolist())
            self._refresh()
            return removed

    def fingerprint(self) -> str:
        """A hash of the ids and their vectors, whatever order they were added in."""
        with self._lock:
            order = np.argsort(self._ids)
            digest = hashlib.sha256(self._ids[order].tobytes())
            digest.update(self._vectors[order].tobytes())
        return digest.hexdigest()

    def _scores(self, queries: np.ndarray) -> torch.Tensor:
        """Every quote's score for each query (queries, quotes), in the rows' order, on the search device.
        torch, not numpy: its thread count is the one the server sets (numpy's BLAS takes every core)."""
        return torch.from_numpy(queries).to(self._device) @ self._search_columns

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
            if self._ivf is None:
                scores = self._scores(queries)
                top_scores, top_rows = torch.topk(scores, k, dim=1)
                log_normalizers = torch.logsumexp(scores.double(), dim=1)
                return top_scores.cpu().numpy(), self._ids[top_rows.cpu().numpy()], log_normalizers.cpu().numpy()
            if self._exact_normalizer():  # a quote set no larger than the sample
                scores, ids = self._search_ivf.search(queries, k)
                return scores, ids, torch.logsumexp(self._scores(queries).double(), dim=1).cpu().numpy()
            head = min(max(k, self.config.normalizer_head), len(self._ids))
            scores, ids = self._search_ivf.search(queries, head)
            log_normalizers = self._estimated_log_normalizers(queries, scores, ids)
        return scores[:, :k], ids[:, :k], log_normalizers

    def all_scores(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every quote's exact score for each query: (ids (quotes,), scores (queries, quotes)), whatever the
        index kind (hybrid ranking needs every score)."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        with self._lock:
            return self._ids.copy(), self._scores(queries).cpu().numpy()

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
