"""Two random-weight cross-encoders of DeBERTa-v3-xsmall's widths (12 layers
× 384, 6 heads, FFN 1536: mxbai-rerank-xsmall-v1's shape), one a
DebertaV2ForSequenceClassification with DeBERTa-v3's flags (256 position
buckets over 512 positions), the other a BertForSequenceClassification of
the same widths, both with the tokenizer of model/convert/testdata/deberta-tiny
(so that both see the same tokens), and a rerank input of 200 queries × 5
candidates: for measuring synapse rerank's tokens/s of the DeBERTa graph
against BERT's, side by side. A benchmark's input only; never used by
synapse.

    .cache/venv-ref/bin/python examples/models/bench_deberta.py --out /tmp/dbench
    head -10 /tmp/dbench/pairs.jsonl > /tmp/dbench/pairs10.jsonl   # about a minute in all on one thread
    for m in deberta bert deberta bert; do
      bin/synapse rerank /tmp/dbench/pairs10.jsonl -m /tmp/dbench/$m -o /tmp/dbench/$m.jsonl --workers 1 --threads 1
    done
"""
import argparse
import json
import os
import random

import torch
from sentence_transformers import CrossEncoder
from transformers import BertConfig, BertForSequenceClassification, DebertaV2Config, DebertaV2ForSequenceClassification
from transformers import PreTrainedTokenizerFast

WORDS = ("cell membrane protein fold shape vaccine immune system virus mice drug trial patients mortality gene "
         "neurons glia blood pressure weeks expression tumours smoking risk lung cancer bacteria antibiotic").split()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    torch.manual_seed(3)
    here = os.path.dirname(os.path.abspath(__file__))
    tok = PreTrainedTokenizerFast.from_pretrained(os.path.join(here, "..", "..", "model", "convert", "testdata", "deberta-tiny"))
    tok.model_max_length = 512
    common = dict(vocab_size=len(tok), hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                  intermediate_size=1536, max_position_embeddings=512, num_labels=1, pad_token_id=0)
    models = {
        "deberta": DebertaV2ForSequenceClassification(DebertaV2Config(
            type_vocab_size=0, relative_attention=True, position_buckets=256, max_relative_positions=-1,
            pos_att_type=["p2c", "c2p"], share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
            architectures=["DebertaV2ForSequenceClassification"], **common)),
        "bert": BertForSequenceClassification(BertConfig(type_vocab_size=2, architectures=["BertForSequenceClassification"], **common)),
    }
    for name, model in models.items():
        d = os.path.join(out, name)
        model.eval().save_pretrained(d, safe_serialization=True)
        tok.save_pretrained(d)
        CrossEncoder(d, device="cpu", max_length=512).save(d)
    rnd = random.Random(5)
    with open(os.path.join(out, "pairs.jsonl"), "w") as f:
        for q in range(200):
            cands = [{"id": f"d{q}-{k}", "text": " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(40, 160)))} for k in range(5)]
            f.write(json.dumps({"query_id": f"q{q}", "query": " ".join(rnd.choice(WORDS) for _ in range(6)), "candidates": cands}) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
