"""Random-weight checkpoints of every architecture synapse converts, all at
all-MiniLM-L6-v2's shape (hidden 384, 6 layers, 12 heads, feed-forward 1536,
max_seq_length 256), saved as sentence-transformers saves them (Transformer,
Pooling, Normalize): the inputs of the "tokens/s against BERT of the same
width" measure in docs/models.md (examples/models/same_width.sh runs it). Speed
only — the weights are random, the vectors meaningless.

    .cache/venv-ref/bin/python examples/models/same_width.py --tokenizer DIR/all-MiniLM-L6-v2 \
        --corpus corpus.jsonl --out .cache/same-width

The encoders (BertModel, DistilBertModel, MPNetModel, ModernBertModel) share
the BERT WordPiece tokenizer of --tokenizer (a sentence-transformers
directory: its tokenizer files are copied), so that every encoder sees the same
token sequences and only the graph differs. Qwen3Model (the GGUF route, for
llama.cpp) needs a byte-level BPE: one of the same vocabulary size (30,522) is
trained on --corpus, so its sequences are about as long; last-token pooling, 12
query heads of 32 and 4 key/value heads (grouped-query attention, as
Qwen3-Embedding), SwiGLU of 1536. A benchmark input only; never used by
synapse.
"""
import argparse
import json
import os
import shutil

import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers import models as stm
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (BertConfig, BertModel, DistilBertConfig, DistilBertModel, ModernBertConfig, ModernBertModel,
                          MPNetConfig, MPNetModel, PreTrainedTokenizerFast, Qwen3Config, Qwen3Model)

HIDDEN, LAYERS, HEADS, FFN, SEQ, VOCAB = 384, 6, 12, 1536, 256, 30522
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"]
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def encoders():
    """Each encoder's model at the shared shape, with BERT's special ids."""
    common = dict(vocab_size=VOCAB, initializer_range=0.02)
    return {
        "bert": BertModel(BertConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                     intermediate_size=FFN, max_position_embeddings=512, pad_token_id=0,
                                     architectures=["BertModel"], **common), add_pooling_layer=False),
        "distilbert": DistilBertModel(DistilBertConfig(dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN,
                                                       max_position_embeddings=512, activation="gelu", pad_token_id=0,
                                                       architectures=["DistilBertModel"], **common)),
        "mpnet": MPNetModel(MPNetConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                        intermediate_size=FFN, max_position_embeddings=514, pad_token_id=1,
                                        architectures=["MPNetModel"], **common), add_pooling_layer=False),
        "modernbert": ModernBertModel(ModernBertConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                                       num_attention_heads=HEADS, intermediate_size=FFN,
                                                       max_position_embeddings=512, pad_token_id=0, cls_token_id=101,
                                                       sep_token_id=102, bos_token_id=101, eos_token_id=102,
                                                       architectures=["ModernBertModel"], **common)),
    }


def save_st(out, pooling, **kw):
    tr = stm.Transformer(out, max_seq_length=SEQ)
    SentenceTransformer(modules=[tr, stm.Pooling(HIDDEN, pooling_mode=pooling), stm.Normalize()], **kw).save(out)
    readme = os.path.join(out, "README.md")
    if os.path.exists(readme):
        os.remove(readme)


def corpus_texts(path):
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            yield (d.get("title", "") + "\n" + d.get("text", "")).strip()


def qwen3(out, corpus):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus_texts(corpus), trainer)
    eot = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", pair="$A <|endoftext|> $B <|endoftext|>",
                                                       special_tokens=[("<|endoftext|>", eot)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   padding_side="left", model_max_length=SEQ)
    cfg = Qwen3Config(vocab_size=len(fast), hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=4, head_dim=HIDDEN // HEADS,
                      max_position_embeddings=512, tie_word_embeddings=True, architectures=["Qwen3Model"])
    os.makedirs(out, exist_ok=True)
    Qwen3Model(cfg).eval().save_pretrained(out, safe_serialization=True)
    fast.save_pretrained(out)
    save_st(out, "lasttoken")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="a BERT sentence-transformers directory (all-MiniLM-L6-v2)")
    ap.add_argument("--corpus", required=True, help="JSONL with title and text, to train Qwen3's BPE on")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.manual_seed(5)
    for name, model in encoders().items():
        out = os.path.join(a.out, name)
        os.makedirs(out, exist_ok=True)
        model.eval().save_pretrained(out, safe_serialization=True)
        for f in TOKENIZER_FILES:
            if os.path.exists(os.path.join(a.tokenizer, f)):
                shutil.copy(os.path.join(a.tokenizer, f), out)
        save_st(out, "mean")
        print("wrote", out, sum(p.numel() for p in model.parameters()), "parameters")
    qwen3(os.path.join(a.out, "qwen3"), a.corpus)
    print("wrote", os.path.join(a.out, "qwen3"))


if __name__ == "__main__":
    main()
