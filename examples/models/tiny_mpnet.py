"""A random-weight MPNet embedder, saved as sentence-transformers saves
all-mpnet-base-v2 (Transformer, Pooling mean, Normalize), its reference
vectors, and transformers' relative position buckets: test data for
synapse's MPNet conversion (safetensors -> ONNX), committed so that CI needs
no torch.

    .cache/venv-ref/bin/python examples/models/tiny_mpnet.py --out model/convert/testdata/mpnet-tiny

The checkpoint has MPNet's layout at small widths (attention.attn.q/k/v/o,
attention.LayerNorm, a relative attention bias of 32 buckets shared by the
layers, positions past padding_idx 1, no token types), its tokenizer an
uncased WordPiece with <s> and </s> around a text and <pad> at id 1, as
all-mpnet-base-v2's. The LayerNorm weights and the bias table are
randomized, so that a converter that drops one is caught; some texts are
long enough (over 40 tokens) for the logarithmic buckets. A test reference
only; never used by synapse.
"""
import argparse
import json
import os

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers import models as stm
from tokenizers import BertWordPieceTokenizer, processors
from transformers import MPNetConfig, MPNetModel, MPNetTokenizerFast
from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

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
    "why some people respond better than others, and what the trials of the last decade found about doses, "
    "side effects, the elderly, children, and the cells that remember an infection for years afterwards.",
    "x",
    "1234567890 numbers 3.14159 and 2,718",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    torch.manual_seed(5)
    wp = BertWordPieceTokenizer(lowercase=True, unk_token="<unk>", sep_token="</s>", cls_token="<s>", pad_token="<pad>", mask_token="<mask>")
    wp.train_from_iterator(TRAIN * 4, vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                           show_progress=False)
    t = wp._tokenizer
    t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                     special_tokens=[("<s>", 0), ("</s>", 2)])
    tok = MPNetTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
                             unk_token="<unk>", pad_token="<pad>", mask_token="<mask>", model_max_length=128)
    assert tok.pad_token_id == 1
    cfg = MPNetConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=130, relative_attention_num_buckets=32,
                      layer_norm_eps=1e-5, initializer_range=0.2, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                      architectures=["MPNetModel"])
    model = MPNetModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.copy_((1 if name.endswith("weight") else 0) + 0.2 * torch.randn_like(p))
            if "relative_attention_bias" in name:
                p.copy_(torch.randn_like(p))
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    tr = stm.Transformer(out, max_seq_length=128)
    st = SentenceTransformer(modules=[tr, stm.Pooling(cfg.hidden_size, pooling_mode="mean"), stm.Normalize()])
    st.save(out)
    st = SentenceTransformer(out, device="cpu")
    docs = st.encode(TEXTS, batch_size=8, convert_to_numpy=True)  # padded batches
    one = st.encode(TEXTS, batch_size=1, convert_to_numpy=True)
    assert float(abs(docs - one).max()) < 1e-5, abs(docs - one).max()
    rel = torch.arange(-600, 601)
    buckets = MPNetEncoder.relative_position_bucket(rel).tolist()
    ids = [tok(x)["input_ids"] for x in TEXTS]
    ref = {"model": "mpnet-tiny (random weights, examples/models/tiny_mpnet.py)",
           "texts": TEXTS, "vectors": docs.tolist(), "token_ids": ids,
           "buckets_from": -600, "buckets": buckets}
    with open(os.path.join(out, "..", "mpnet-tiny.reference.json"), "w") as f:
        json.dump(ref, f)
    print("wrote", out, "vocab", len(tok), "dims", docs.shape, "longest", max(len(i) for i in ids))


if __name__ == "__main__":
    main()
