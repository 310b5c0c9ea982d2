"""A random-weight DistilBERT embedder, saved as sentence-transformers saves
multi-qa-distilbert-cos-v1 (Transformer, Pooling mean, Normalize), and its
reference vectors: test data for synapse's DistilBERT conversion
(safetensors -> ONNX), committed so that CI needs no torch.

    .cache/venv-ref/bin/python examples/models/tiny_distilbert.py --out model/convert/testdata/distilbert-tiny

The checkpoint has DistilBERT's layout at small widths (no token type
embeddings, q_lin/k_lin/v_lin/out_lin, sa_layer_norm, ffn.lin1/lin2,
output_layer_norm), its tokenizer an uncased WordPiece with [CLS] and [SEP].
The LayerNorm weights are randomized too, so that a converter that drops one
is caught. A test reference only; never used by synapse.
"""
import argparse
import json
import os

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers import models as stm
from tokenizers import BertWordPieceTokenizer
from transformers import DistilBertConfig, DistilBertModel, DistilBertTokenizerFast

TRAIN = """The cell divides after the membrane has grown. Proteins fold into shapes that decide their work.
Vaccines teach the immune system to know a virus before it comes. Mice given the drug lived longer than the controls.
A randomized trial of 2,400 patients found no difference in mortality. The gene is expressed in neurons and in glia.
Blood pressure fell by 12 mmHg over six weeks. We measured the expression of 35 genes in 120 tumours.
Smoking raises the risk of lung cancer; quitting lowers it again. The bacteria resisted every antibiotic we tried.
""".split(". ")

TEXTS = [
    "Stem cells repair the damaged heart muscle in rats.",
    "What lowers blood pressure without drugs?",
    "Café résumé naïve: the patients' symptoms improved (p < 0.05).",
    "A much longer passage about how the immune system learns to recognise viruses, how vaccines train it, "
    "why some people respond better than others, and what the trials of the last decade found about doses.",
    "x",
    "1234567890 numbers 3.14159 and 2,718",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    torch.manual_seed(11)
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(TRAIN * 4, vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                           show_progress=False)
    tok = DistilBertTokenizerFast(tokenizer_object=wp._tokenizer, unk_token="[UNK]", sep_token="[SEP]",
                                  pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]", model_max_length=128)
    cfg = DistilBertConfig(vocab_size=len(tok), dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=128,
                           activation="gelu", initializer_range=0.2, pad_token_id=0, architectures=["DistilBertModel"])
    model = DistilBertModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name.lower() or "LayerNorm" in name:
                p.copy_((1 if name.endswith("weight") else 0) + 0.2 * torch.randn_like(p))
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    tr = stm.Transformer(out, max_seq_length=64)
    st = SentenceTransformer(modules=[tr, stm.Pooling(cfg.dim, pooling_mode="mean"), stm.Normalize()])
    st.save(out)
    st = SentenceTransformer(out, device="cpu")
    docs = st.encode(TEXTS, batch_size=8, convert_to_numpy=True)  # padded batches
    one = st.encode(TEXTS, batch_size=1, convert_to_numpy=True)
    assert float(abs(docs - one).max()) < 1e-5, abs(docs - one).max()
    ref = {"model": "distilbert-tiny (random weights, examples/models/tiny_distilbert.py)",
           "texts": TEXTS, "vectors": docs.tolist(), "token_ids": [tok(t)["input_ids"] for t in TEXTS]}
    with open(os.path.join(out, "..", "distilbert-tiny.reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print("wrote", out, "vocab", len(tok), "dims", docs.shape)


if __name__ == "__main__":
    main()
