"""A random-weight ModernBERT reranker (ModernBertForSequenceClassification,
one label), saved as sentence-transformers' CrossEncoder saves
gte-reranker-modernbert-base, and its reference scores: test data for
synapse's conversion of ModernBERT cross-encoders (safetensors -> ONNX),
committed so that CI needs no torch.

    .cache/venv-ref/bin/python examples/models/tiny_modernbert_rerank.py --out model/convert/testdata/modernbert-rerank-tiny

The encoder is tiny_modernbert.py's (same tokenizer, same widths, local layers
seeing 8 positions each way, so that every pair crosses the window); the head
is ModernBERT's: pooling (classifier_pooling "mean" over the attention mask,
or "cls"), dense without bias, GELU, a LayerNorm without bias, then the
classifier (with bias). The checkpoint is saved with "mean", as
gte-reranker-modernbert-base is; the reference holds the raw logits
(CrossEncoder.predict with an identity activation) for both pooling modes of
the same weights, so that a test edits config.json to "cls" and compares with
the "cls" scores. Every pair fits in max_length (no truncation). A test
reference only; never used by synapse.
"""
import argparse
import json
import os

import torch
from sentence_transformers import CrossEncoder
from transformers import ModernBertConfig, ModernBertForSequenceClassification

from tiny_modernbert import make_tokenizer

# Unseen pairs: none of these sentences is in the tokenizer's training text.
PAIRS = [
    ("Does aspirin prevent heart attacks?",
     "Low-dose aspirin reduced the rate of first myocardial infarction in men over fifty, but bleeding rose."),
    ("Does aspirin prevent heart attacks?", "The river floods every spring when the snow melts in the mountains."),
    ("Does aspirin prevent heart attacks?", "x"),
    ("How do vaccines work?",
     "A much longer passage about how the immune system learns to recognise viruses, how vaccines train it, "
     "why some people respond better than others, what the trials of the last decade found about doses, "
     "and which side effects were seen in children and in the elderly."),
    ("How do vaccines work?", "Café résumé naïve: the patients' symptoms improved (p < 0.05)."),
    ("How do vaccines work?", "Antibodies bind the spike protein; memory B cells persist for years."),
    ("gene expression in tumours", "1234567890 numbers 3.14159 and 2,718"),
    ("gene expression in tumours",
     "We sequenced RNA from 88 tumours and their normal tissue; 412 genes differed, most of them in pathways "
     "of cell division, DNA repair and the response to hypoxia, and the signature predicted survival."),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    torch.manual_seed(29)
    tok = make_tokenizer()
    tok.model_max_length = 256
    cfg = ModernBertConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                           num_attention_heads=4, max_position_embeddings=256, local_attention=16,
                           global_attn_every_n_layers=3, global_rope_theta=160000.0, local_rope_theta=10000.0,
                           norm_eps=1e-5, norm_bias=False, hidden_activation="gelu", initializer_range=0.2,
                           classifier_pooling="mean", classifier_activation="gelu", classifier_bias=False,
                           pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3,
                           num_labels=1, architectures=["ModernBertForSequenceClassification"])
    model = ModernBertForSequenceClassification(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            if name == "classifier.bias":
                p.copy_(torch.randn_like(p))
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    CrossEncoder(out, device="cpu", max_length=256).save(out)
    for junk in ["README.md"]:
        if os.path.exists(os.path.join(out, junk)):
            os.remove(os.path.join(out, junk))
    ident = torch.nn.Identity()
    lengths = [len(tok(q, d)["input_ids"]) for q, d in PAIRS]
    assert max(lengths) <= 256 and min(lengths) > 0
    ref = {"model": "modernbert-rerank-tiny (random weights, examples/models/tiny_modernbert_rerank.py)",
           "pairs": [list(p) for p in PAIRS], "token_ids": [tok(q, d)["input_ids"] for q, d in PAIRS], "scores": {}}
    for pooling in ["mean", "cls"]:
        ce = CrossEncoder(out, device="cpu", max_length=256, config_kwargs={"classifier_pooling": pooling})
        assert ce.model.config.classifier_pooling == pooling
        padded = ce.predict(PAIRS, batch_size=8, activation_fn=ident)
        one = ce.predict(PAIRS, batch_size=1, activation_fn=ident)
        assert float(abs(padded - one).max()) < 1e-5, abs(padded - one).max()
        ref["scores"][pooling] = [float(s) for s in padded]
    with open(os.path.join(out, "..", "modernbert-rerank-tiny.reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print("wrote", out, "vocab", len(tok), "pair tokens", min(lengths), "to", max(lengths), "scores", ref["scores"])


if __name__ == "__main__":
    main()
