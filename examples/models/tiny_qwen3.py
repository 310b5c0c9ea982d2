"""A random-weight Qwen3 embedder, saved as sentence-transformers saves
Qwen3-Embedding, and its reference vectors: test data for synapse's Qwen3
route (safetensors -> GGUF -> llama.cpp), committed so that CI needs no torch.

    .cache/venv-ref/bin/python examples/models/tiny_qwen3.py --out model/convert/testdata/qwen3-tiny

The checkpoint has Qwen3-Embedding-0.6B's layout at small widths (grouped-query
attention with a head_dim that is not hidden/heads, per-head q/k RMSNorm, NeoX
rotary positions, SwiGLU, tied embeddings), its tokenizer the same kind
(byte-level BPE with Qwen2's pre-tokenizer regex and NFC, <|endoftext|>
appended by the post-processor), its sentence-transformers chain the same
(Transformer, Pooling lasttoken, Normalize) with an instruction prompt for
queries. The norm weights are randomized too, so that a converter that drops
one is caught. A test reference only; never used by synapse.
"""
import argparse
import json
import os

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers import models as stm
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model

QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QUERY_PROMPT = "Instruct: Given a question, retrieve passages that answer it\nQuery:"

TRAIN = """The cell divides after the membrane has grown. Proteins fold into shapes that decide their work.
Vaccines teach the immune system to know a virus before it comes. Mice given the drug lived longer than the controls.
A randomized trial of 2,400 patients found no difference in mortality. The gene is expressed in neurons and in glia.
Blood pressure fell by 12 mmHg over six weeks. We measured the expression of 35 genes in 120 tumours.
Smoking raises the risk of lung cancer; quitting lowers it again. The bacteria resisted every antibiotic we tried.
Sleep deprivation impairs memory consolidation in adults and in children. Insulin resistance precedes type 2 diabetes.
Temperature, pH and salt changed how fast the enzyme worked. The virus entered the cells through the ACE2 receptor.
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
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(TRAIN * 4, trainer)
    eot = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", pair="$A <|endoftext|> $B <|endoftext|>",
                                                       special_tokens=[("<|endoftext|>", eot)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   padding_side="left")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    torch.manual_seed(7)
    tok = tokenizer()
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                      rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=0.2,
                      hidden_act="silu", architectures=["Qwen3Model"])
    model = Qwen3Model(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    tr = stm.Transformer(out, max_seq_length=128)
    st = SentenceTransformer(modules=[tr, stm.Pooling(cfg.hidden_size, pooling_mode="lasttoken"), stm.Normalize()],
                             prompts={"query": QUERY_PROMPT, "document": ""})
    st.save(out)
    st = SentenceTransformer(out, device="cpu")  # as a user loads it
    docs = st.encode(TEXTS, batch_size=8, convert_to_numpy=True)  # padded (left) batches
    one = st.encode(TEXTS, batch_size=1, convert_to_numpy=True)  # unpadded
    assert float(abs(docs - one).max()) < 1e-5, abs(docs - one).max()
    queries = st.encode(QUERIES, prompt_name="query", batch_size=2, convert_to_numpy=True)
    ids = [tok(t)["input_ids"] for t in TEXTS]
    ref = {"model": "qwen3-tiny (random weights, examples/models/tiny_qwen3.py)",
           "texts": TEXTS, "vectors": docs.tolist(), "token_ids": ids,
           "queries": QUERIES, "query_prompt": QUERY_PROMPT, "query_vectors": queries.tolist()}
    with open(os.path.join(out, "..", "qwen3-tiny.reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print("wrote", out, "vocab", len(tok), "dims", docs.shape)


if __name__ == "__main__":
    main()
