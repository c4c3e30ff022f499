"""The service a user would write instead of Quoter, for benchmarks.versus to compare against (not a part of Quoter).

    python -m benchmarks.reference_service --bundle DIR --port PORT

all-MiniLM-L6-v2 read with plain transformers in float32 and pooled the sentence-transformers way (mean over
the tokens, then unit length), the quotes' vectors in a faiss IndexFlatIP, behind FastAPI on uvicorn. It
serves the quotes and quote vectors of a Quoter bundle folder (quotes.jsonl, quote_vectors.safetensors), so
both services search the same quotes. POST /recommend takes Quoter's {"left", "right", "k"} and answers the
top k quotes with their scores; GET /health answers once it is loaded. Each request is encoded on its own
(no batching), in FastAPI's thread pool.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import faiss
import torch
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from safetensors.torch import load_file

from quoter.encoders.model_sources import load_pretrained

MODEL = "offline:minilm-en"


class Context(BaseModel):
    left: str
    right: str = ""
    k: int = 10


def create_app(bundle: Path) -> FastAPI:
    """The reference service over the bundle's quotes."""
    model, tokenizer = load_pretrained(MODEL)
    model.eval()
    quotes = [json.loads(line)["quote"] for line in (bundle / "quotes.jsonl").read_text(encoding="utf-8").splitlines()]
    index = faiss.IndexFlatIP(model.config.hidden_size)
    index.add(load_file(str(bundle / "quote_vectors.safetensors"))["vectors"].numpy())
    app = FastAPI()

    def embed(text: str) -> torch.Tensor:
        inputs = tokenizer([text], padding=True, truncation=True, max_length=256, return_tensors="pt")
        with torch.inference_mode():
            hidden = model(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).float()
        return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "quotes": len(quotes)}

    @app.post("/recommend")
    def recommend(context: Context) -> dict:
        scores, ids = index.search(embed(f"{context.left} {context.right}".strip()).numpy(), context.k)
        return {"results": [{"id": int(i), "quote": quotes[i], "score": float(s)} for s, i in zip(scores[0], ids[0])]}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True, help="Quoter bundle folder whose quotes to serve")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, help="torch and faiss threads (default: their own choice, all cores)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
        faiss.omp_set_num_threads(args.threads)
    uvicorn.run(create_app(args.bundle), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
