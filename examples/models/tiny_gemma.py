"""A random-weight EmbeddingGemma-style embedder, saved as sentence-transformers
saves google/embeddinggemma-300m, and its reference vectors: test data for
synapse's Gemma route (safetensors -> GGUF "gemma-embedding" -> llama.cpp),
committed so that CI needs no torch.

    /work/venv-ref/bin/python examples/models/tiny_gemma.py --out model/convert/testdata/gemma-tiny

The checkpoint has embeddinggemma-300m's layout at small widths: a Gemma 3 text
model with bidirectional attention, grouped-query attention with a head_dim that
is not hidden/heads, per-head q/k RMSNorm, Gemma's (1 + weight) RMSNorms before
and after attention and the feed-forward layer, GeGLU (tanh GELU), embeddings
scaled by sqrt(hidden), and the layer pattern of five sliding-window layers then
one full-attention layer (seven layers: both kinds, and a pattern that restarts),
with rotary bases 10,000 (sliding) and 1,000,000 (full). The sliding window is
8 tokens, so most texts exceed it. The tokenizer is the same kind as Gemma's
(transformers' GemmaTokenizer: spaces as U+2581, byte fallback <0xXX>, merges
for every pair whose join is a token, by the join's score; <bos> and <eos>
added), its vocabulary trained on a few texts. The sentence-transformers chain is the same:
Transformer, Pooling (mean), Dense (hidden -> 4 x hidden, no bias, identity),
Dense (4 x hidden -> hidden), Normalize, with EmbeddingGemma's prompts. The
norm weights are randomized too, so that a converter that drops one (or
forgets Gemma's +1) is caught. A test reference only; never used by synapse.
"""
import argparse
import json
import os

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers import models as stm
from tokenizers import Tokenizer, models, normalizers, trainers
from transformers import Gemma3TextConfig, Gemma3TextModel, GemmaTokenizer
from transformers.tokenization_utils_base import generate_merges

PROMPTS = {"query": "task: search result | query: ", "document": "title: none | text: ",
           "Clustering": "task: clustering | query: "}
SPACE = "\u2581"

TRAIN = """The cell divides after the membrane has grown. Proteins fold into shapes that decide their work.
Vaccines teach the immune system to know a virus before it comes. Mice given the drug lived longer than the controls.
A randomized trial of 2,400 patients found no difference in mortality. The gene is expressed in neurons and in glia.
Blood pressure fell by 12 mmHg over six weeks. We measured the expression of 35 genes in 120 tumours.
Smoking raises the risk of lung cancer; quitting lowers it again. The bacteria resisted every antibiotic we tried.
task: search result | query: title: none | text: task: clustering | query:
""".split(". ")

TEXTS = [
    "Stem cells repair the damaged heart muscle in rats.",
    "What lowers blood pressure without drugs?",
    "Café résumé naïve: the patients' symptoms improved (p < 0.05).",
    "中文的句子 and an emoji 🧬 in one text",
    "  leading spaces,\ttabs and\nnew lines\n\n",
    "A much longer passage about how the immune system learns to recognise viruses, how vaccines train it, "
    "why some people respond better than others, and what the trials of the last decade found about doses.",
    "x",
    "1234567890 numbers 3.14159 and 2,718",
]
QUERIES = ["Do vaccines train the immune system?", "How does insulin resistance start?"]


def tokenizer():
    """transformers' GemmaTokenizer (the class google/embeddinggemma-300m's
    tokenizer.json comes from: spaces replaced by U+2581, a no-op split at
    spaces, BPE with byte fallback, <bos> and <eos> added) over a small
    vocabulary: <pad> <eos> <bos> <unk> <mask>, the 256 byte tokens, then what
    a BPE trainer learns on TRAIN, scored as SentencePiece scores BPE pieces
    (-id); the merges are transformers' generate_merges of those scores, as
    its SentencePiece converter writes Gemma's."""
    learn = Tokenizer(models.BPE(unk_token="<unk>"))
    learn.normalizer = normalizers.Replace(" ", SPACE)
    learn.train_from_iterator(TRAIN * 4, trainers.BpeTrainer(vocab_size=500, show_progress=False))
    toks = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"] + [f"<0x{b:02X}>" for b in range(256)]
    learned = sorted(learn.get_vocab().items(), key=lambda kv: kv[1])
    toks += [t for t, _ in learned if t not in toks]
    vocab = {t: i for i, t in enumerate(toks)}
    merges = generate_merges(vocab, {t: -float(i) for t, i in vocab.items()})
    return GemmaTokenizer(vocab=vocab, merges=merges, add_bos_token=True, add_eos_token=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    torch.manual_seed(11)
    tok = tokenizer()
    cfg = Gemma3TextConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=7,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=16,
                           max_position_embeddings=256, sliding_window=8, use_bidirectional_attention=True,
                           rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                           rms_norm_eps=1e-6, initializer_range=0.2, hidden_activation="gelu_pytorch_tanh",
                           pad_token_id=0, eos_token_id=1, bos_token_id=2, architectures=["Gemma3TextModel"])
    model = Gemma3TextModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.3 * torch.randn_like(p))  # Gemma's norms scale by (1 + weight)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    tr = stm.Transformer(out, max_seq_length=128)
    h = cfg.hidden_size
    st = SentenceTransformer(modules=[tr, stm.Pooling(h, pooling_mode="mean"),
                                      stm.Dense(h, 4 * h, bias=False, activation_function=torch.nn.Identity()),
                                      stm.Dense(4 * h, h, bias=False, activation_function=torch.nn.Identity()),
                                      stm.Normalize()], prompts=PROMPTS)
    st.save(out)
    os.remove(os.path.join(out, "README.md"))  # a generated model card: not test data
    st = SentenceTransformer(out, device="cpu")  # as a user loads it
    docs = st.encode(TEXTS, prompt_name="document", batch_size=8, convert_to_numpy=True)  # padded batches
    one = st.encode(TEXTS, prompt_name="document", batch_size=1, convert_to_numpy=True)  # unpadded
    assert float(abs(docs - one).max()) < 1e-5, abs(docs - one).max()
    plain = st.encode(TEXTS, batch_size=8, convert_to_numpy=True)  # no prompt
    queries = st.encode(QUERIES, prompt_name="query", batch_size=2, convert_to_numpy=True)
    ids = [tok(t)["input_ids"] for t in TEXTS]
    ref = {"model": "gemma-tiny (random weights, examples/models/tiny_gemma.py)",
           "texts": TEXTS, "vectors": plain.tolist(), "token_ids": ids,
           "document_prompt": PROMPTS["document"], "document_vectors": docs.tolist(),
           "queries": QUERIES, "query_prompt": PROMPTS["query"], "query_vectors": queries.tolist()}
    with open(os.path.join(out, "..", "gemma-tiny.reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print("wrote", out, "vocab", len(tok), "dims", docs.shape, "tokens", [len(i) for i in ids])


if __name__ == "__main__":
    main()
