"""A random-weight DeBERTa-v3 cross-encoder, saved as sentence-transformers'
CrossEncoder saves mxbai-rerank-xsmall-v1 (DebertaV2ForSequenceClassification,
one label), and its reference scores: test data for synapse's DeBERTa-v2/v3
conversion (safetensors -> ONNX), committed so that CI needs no torch.

    .cache/venv-ref/bin/python examples/models/tiny_deberta.py --out model/convert/testdata/deberta-tiny
    .cache/venv-ref/bin/python examples/models/tiny_deberta.py --variant v2 --out model/convert/testdata/deberta-v2-tiny

The checkpoint has DeBERTa-v3's layout and config flags at small widths:
disentangled attention (relative_attention, pos_att_type p2c|c2p,
share_att_key), relative positions in log buckets (position_buckets 16, so
that |i - j| >= 8 is bucketed logarithmically up to max_relative_positions,
here max_position_embeddings 128), rel_embeddings with a LayerNorm
(norm_rel_ebd layer_norm), no absolute positions (position_biased_input
false), no token types (type_vocab_size 0), the ContextPooler (first token,
dense, GELU) and a one-logit classifier. Its tokenizer is a Unigram with
[CLS] q [SEP] d [SEP] pairs (token types 0 then 1), laid out as the Hub's
DeBERTa-v3 tokenizer.json is (Strip, then NFKC where the Hub file has
SentencePiece's Precompiled nmt_nfkc map, then Replace " {2,}"; Metaspace
prepend "always"). The LayerNorm weights are randomized, so that a converter
that drops one is caught. --variant v2 keeps the layout but takes the other
settings the converter reads: token types (type_vocab_size 2, fed by the
pair's types 0 and 1), no position buckets (relative positions clamped to
max_relative_positions 48), rel_embeddings without a LayerNorm. A test
reference only; never used by synapse.
"""
import argparse
import json
import os

import torch
from sentence_transformers import CrossEncoder
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, DebertaV2Config, DebertaV2ForSequenceClassification, PreTrainedTokenizerFast
from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

TRAIN = """The cell divides after the membrane has grown. Proteins fold into shapes that decide their work.
Vaccines teach the immune system to know a virus before it comes. Mice given the drug lived longer than the controls.
A randomized trial of 2,400 patients found no difference in mortality. The gene is expressed in neurons and in glia.
Blood pressure fell by 12 mmHg over six weeks. We measured the expression of 35 genes in 120 tumours.
Smoking raises the risk of lung cancer; quitting lowers it again. The bacteria resisted every antibiotic we tried.
""".split(". ")

LONG = ("A much longer passage about how the immune system learns to recognise viruses, how vaccines train it, "
        "why some people respond better than others, and what the trials of the last decade found about doses, "
        "side effects, the elderly, children, and the cells that remember an infection for years afterwards.")

# Query–document pairs the tokenizer was not trained on; some are longer than
# the 8 positions each way that DeBERTa's buckets keep exact, one is cut to
# max_length (the document only: the query is short).
PAIRS = [
    ("What repairs the heart?", "Stem cells repair the damaged heart muscle in rats."),
    ("What lowers blood pressure without drugs?", "Blood pressure fell by 12 mmHg over six weeks of exercise."),
    ("Café résumé", "naïve:  the patients' symptoms improved (p < 0.05)."),
    ("immune memory", LONG),
    ("vaccines and the elderly", LONG + " " + LONG),
    ("x", "y"),
    ("1234567890 numbers", "3.14159 and 2,718\tand\nmore   spaces "),
    ("How do mice respond?", "Mice given the drug lived longer than the controls, and the gene is expressed in glia."),
]


# DeBERTa-v3's flags (mxbai-rerank-*-v1, deberta-v3-*): log buckets, the
# relative embeddings' LayerNorm, no token types.
V3 = dict(type_vocab_size=0, position_buckets=16, max_relative_positions=-1, norm_rel_ebd="layer_norm")
# The other settings the converter reads (--variant v2): token types, no
# buckets (relative positions clamped to max_relative_positions, here 48, less
# than the 128 a pair reaches), no LayerNorm on the relative embeddings.
V2 = dict(type_vocab_size=2, max_relative_positions=48, norm_rel_ebd="none")


def tokenizer():
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.Sequence([normalizers.Strip(), normalizers.NFKC(),
                                         normalizers.Replace(Regex(" {2,}"), " ")])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    t.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"],
                                      unk_token="[UNK]", show_progress=False)
    t.train_from_iterator(TRAIN * 4, trainer)
    t.post_processor = processors.TemplateProcessing(single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
                                                     special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=t, bos_token="[CLS]", eos_token="[SEP]", unk_token="[UNK]",
                                   sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]",
                                   model_max_length=128,
                                   # DebertaV2Tokenizer's: pairs carry token types 0 and 1 to the model
                                   model_input_names=["input_ids", "token_type_ids", "attention_mask"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--variant", choices=["v3", "v2"], default="v3")
    args = ap.parse_args()
    out, flags = args.out, V3
    if args.variant == "v2":
        flags = V2
    torch.manual_seed(17)
    tok = tokenizer()
    assert tok.pad_token_id == 0 and tok.cls_token_id == 1 and tok.sep_token_id == 2
    cfg = DebertaV2Config(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=64, max_position_embeddings=128, relative_attention=True,
                          pos_att_type=["p2c", "c2p"], share_att_key=True, position_biased_input=False, **flags, layer_norm_eps=1e-7, hidden_act="gelu",
                          pooler_hidden_act="gelu", pooler_hidden_size=32, pooler_dropout=0, initializer_range=0.2,
                          pad_token_id=0, num_labels=1, architectures=["DebertaV2ForSequenceClassification"])
    model = DebertaV2ForSequenceClassification(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.copy_((1 if name.endswith("weight") else 0) + 0.2 * torch.randn_like(p))
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    ce = CrossEncoder(out, device="cpu", max_length=128)
    ce.save(out)
    ce = CrossEncoder(out, device="cpu")
    loaded = AutoTokenizer.from_pretrained(out)
    assert loaded.backend_tokenizer.to_str() == tok.backend_tokenizer.to_str(), "the saved tokenizer.json is not the one loaded"
    assert 1 in loaded("a", "b")["token_type_ids"], "the loaded tokenizer gives no token types"
    ident = torch.nn.Identity()
    logits = ce.predict(PAIRS, batch_size=8, activation_fn=ident, convert_to_numpy=True)  # padded batches
    one = ce.predict(PAIRS, batch_size=1, activation_fn=ident, convert_to_numpy=True)
    assert float(abs(logits - one).max()) < 1e-5, abs(logits - one).max()
    sig = ce.predict(PAIRS, batch_size=8, convert_to_numpy=True)  # CrossEncoder's default: sigmoid of the logit
    os.remove(os.path.join(out, "README.md"))  # sentence-transformers' generated model card
    rel = torch.arange(-600, 601)
    buckets = {f"{b}/{m}": make_log_bucket_position(rel, b, m).long().tolist() for b, m in ((16, 128), (256, 512))}
    enc = [tok(q, d, truncation=True, max_length=128) for q, d in PAIRS]
    name = os.path.basename(os.path.normpath(out))
    ref = {"model": name + " (random weights, examples/models/tiny_deberta.py --variant " + args.variant + ")",
           "max_length": ce.max_seq_length,
           "pairs": [{"query": q, "doc": d} for q, d in PAIRS],
           "scores": logits.tolist(), "sigmoid": sig.tolist(),
           "token_ids": [e["input_ids"] for e in enc],
           "truncated": [len(tok(q, d)["input_ids"]) > 128 for q, d in PAIRS],
           "single_ids": [tok(q)["input_ids"] for q, _ in PAIRS],
           "buckets_from": -600, "buckets": buckets}
    with open(os.path.join(out, "..", name + ".reference.json"), "w") as f:
        json.dump(ref, f)
    print("wrote", out, "vocab", len(tok), "scores", logits.tolist(), "longest", max(len(e["input_ids"]) for e in enc))


if __name__ == "__main__":
    main()
