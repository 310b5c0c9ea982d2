"""A random-weight ModernBERT embedder, saved as sentence-transformers saves
modernbert-embed-base (Transformer, Pooling mean, Normalize), and its
reference vectors: test data for synapse's ModernBERT conversion
(safetensors -> ONNX), committed so that CI needs no torch.

    .cache/venv-ref/bin/python examples/models/tiny_modernbert.py --out model/convert/testdata/modernbert-tiny

The checkpoint has ModernBERT's layout at small widths: pre-norm layers (the
first without attn_norm), a fused Wqkv, rotary positions with one base for
global layers and another for local ones, local layers attending only within
a window (here 16, so that the texts cross it), a global layer every third,
GeGLU (Wi, Wo), LayerNorms without biases, final_norm; no biases at all. Its
tokenizer is a byte-level BPE with [CLS] and [SEP] around a text, as
ModernBERT's. The norm weights are randomized, so that a converter that drops
one is caught. A test reference only; never used by synapse.
"""
import argparse
import json
import os

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers import models as stm
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import ModernBertConfig, ModernBertModel, PreTrainedTokenizerFast

TRAIN = """The cell divides after the membrane has grown. Proteins fold into shapes that decide their work.
Vaccines teach the immune system to know a virus before it comes. Mice given the drug lived longer than the controls.
A randomized trial of 2,400 patients found no difference in mortality. The gene is expressed in neurons and in glia.
Blood pressure fell by 12 mmHg over six weeks. We measured the expression of 35 genes in 120 tumours.
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


def make_tokenizer():
    """ModernBERT's kind of tokenizer, trained on TRAIN: byte-level BPE,
    [CLS] a [SEP] and [CLS] a [SEP] b [SEP], no token types."""
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t.train_from_iterator(TRAIN * 4, trainer)
    t.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                     special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                  pad_token="[PAD]", mask_token="[MASK]", model_max_length=128)
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    torch.manual_seed(13)
    tok = make_tokenizer()
    cfg = ModernBertConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                           num_attention_heads=4, max_position_embeddings=256, local_attention=16,
                           global_attn_every_n_layers=3, global_rope_theta=160000.0, local_rope_theta=10000.0,
                           norm_eps=1e-5, norm_bias=False, hidden_activation="gelu", initializer_range=0.2,
                           pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3,
                           architectures=["ModernBertModel"])
    model = ModernBertModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.2 * torch.randn_like(p))
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
    ids = [tok(x)["input_ids"] for x in TEXTS]
    ref = {"model": "modernbert-tiny (random weights, examples/models/tiny_modernbert.py)",
           "texts": TEXTS, "vectors": docs.tolist(), "token_ids": ids}
    with open(os.path.join(out, "..", "modernbert-tiny.reference.json"), "w") as f:
        json.dump(ref, f)
    print("wrote", out, "vocab", len(tok), "dims", docs.shape, "longest", max(len(i) for i in ids))


if __name__ == "__main__":
    main()
