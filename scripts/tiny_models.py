#!/usr/bin/env python3
"""Builds the tiny GGUF models diffeval's engine tests serve with llama-server.

Runs inside the engine chroot (scripts/engine-chroot.sh), where gguf-py and
numpy are packaged:

    python3 tiny_models.py OUT_DIR

writes OUT_DIR/outcomes.gguf and OUT_DIR/random.gguf. Both are deterministic:
the same script writes the same bytes.

outcomes.gguf is not trained: its weights are set by hand so that what it
answers is known in advance and covers every outcome diffeval classifies. It
is a llama-architecture model of 2 layers (the second all zeros) whose
output depends on two things only:

  * the current token (one-hot "identity" dimensions, read by the output
    matrix: the token's successor in a chain wins), and
  * a class chosen by a marker byte in the question (one attention head looks
    for a marker token and, when there is none, for the BOS token, and copies
    that token's class into the residual stream).

Each class is a chain of whole-phrase tokens ending in EOS, a stop string or
a loop, listed in CHAINS below with the marker that selects it. The chain is
the same whatever the framing: the raw prompt ends in "Answer:" and the chat
prompt in "\n", and both are predecessors of every chain's first token.

random.gguf has the same tokenizer and seeded random weights: its texts mean
nothing, but a change of numerics (KV-cache type, threads) changes them.
"""

import sys
from pathlib import Path

import gguf
import numpy as np

EOS = "<|im_end|>"
THINK = "<think>"

# marker byte in the question -> (name, chain of token texts). A chain's last
# element is EOS, or ("loop", i): continue from the chain's element i.
CHAINS = {
    None: ("finished_eos", [" Each box holds 6 pens, so 2 boxes hold 2 * 6 = <<2*6=12>>12 pens.",
                            "\n#### 12", EOS]),
    "~": ("finished_stop_after_answer", [" 5 + 4 = <<5+4=9>>9 apples.", "\n#### 9",
                                         "\n\nQuestion", ": And one more", EOS]),
    "^": ("empty_answer_stop", ["Question", ": How many", EOS]),
    "@": ("think_unclosed_stop", [THINK, "\nThe boxes hold 12 pens. Wait, let me check the ",
                                  "Question again.", " Hmm", " and", ("loop", 3)]),
    "`": ("length_loop", [" 1", " 2", " 3", ("loop", 0)]),
    "|": ("think_eos", [THINK, "\nLet me think", EOS]),
}

SPECIALS = [("<|endoftext|>", gguf.TokenType.CONTROL), ("<|im_start|>", gguf.TokenType.CONTROL),
            (EOS, gguf.TokenType.CONTROL), (THINK, gguf.TokenType.USER_DEFINED),
            ("</think>", gguf.TokenType.USER_DEFINED)]

# Qwen style; with enable_thinking = false the generation prompt closes an
# empty think block, as Qwen3's template does.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}{%- endif -%}")

HIDDEN = 128
HEADS = 2
HEAD_DIM = HIDDEN // HEADS
FFN = 128
LAYERS = 2
CONTEXT = 4096


def byte_to_unicode():
    """GPT-2's printable stand-ins for the 256 bytes (how byte-level BPE
    vocabularies spell them)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


B2U = byte_to_unicode()


def spell(text):
    return "".join(B2U[b] for b in text.encode("utf-8"))


def vocabulary():
    """Tokens: the specials, the 256 bytes, then every chain's phrases."""
    tokens, types = [], []
    for text, kind in SPECIALS:
        tokens.append(text)
        types.append(kind)
    for b in range(256):
        tokens.append(B2U[b])
        types.append(gguf.TokenType.NORMAL)
    ids = {text: i for i, (text, _) in enumerate(SPECIALS)}
    for _, chain in CHAINS.values():
        for step in chain:
            if isinstance(step, tuple) or step in ids:
                continue
            ids[step] = len(tokens)
            tokens.append(spell(step))
            types.append(gguf.TokenType.NORMAL)
    return tokens, types, ids


def byte_id(ch):
    return len(SPECIALS) + ord(ch)


def outcome_weights(n_vocab, ids):
    """The hand-set weights; see the module comment."""
    classes = list(CHAINS)  # None (the default) first
    # Residual dimensions.
    d_bias, d_marker, d_bos = 0, 1, 2
    d_class = 3                     # the marker's own class, read by attention
    d_context = d_class + len(classes)  # the class attention copied in
    d_identity = d_context + len(classes)
    prompt_ends = [byte_id(":"), byte_id("\n")]
    identity = {}
    for tok in prompt_ends + sorted(set(ids.values())):
        identity.setdefault(tok, d_identity + len(identity))
    assert d_identity + len(identity) <= HIDDEN - 1

    f32 = np.float32
    embd = np.zeros((n_vocab, HIDDEN), f32)
    embd[:, d_bias] = 1.0
    for tok, dim in identity.items():
        embd[tok, dim] = 1.0
    embd[0, d_bos] = 1.0                      # BOS stands for the default class
    embd[0, d_class + classes.index(None)] = 1.0
    for c, marker in enumerate(classes):
        if marker is not None:
            embd[byte_id(marker), d_marker] = 1.0
            embd[byte_id(marker), d_class + c] = 1.0

    # Attention, head 0: the query is constant, the key is large on markers
    # and half as large on BOS, so softmax picks the marker when there is one.
    # Dimension 62 of the head rotates slowest under RoPE (with the large
    # frequency base below it does not rotate at all in 4,096 positions).
    q = np.zeros((HIDDEN, HIDDEN), f32)
    k = np.zeros((HIDDEN, HIDDEN), f32)
    v = np.zeros((HIDDEN, HIDDEN), f32)
    o = np.zeros((HIDDEN, HIDDEN), f32)
    slow = HEAD_DIM - 2
    q[slow, d_bias] = 1.0
    k[slow, d_marker] = 8.0
    k[slow, d_bos] = 4.0
    for c in range(len(classes)):
        v[c, d_class + c] = 1.0
        o[d_context + c, c] = 1.0 / 6.0

    # Output: a token's logit is 2 per predecessor that is the current token
    # plus 1 per class of its chain that is the current class.
    out = np.zeros((n_vocab, HIDDEN), f32)
    for c, marker in enumerate(classes):
        _, chain = CHAINS[marker]
        prev = prompt_ends
        for step in chain:
            if isinstance(step, tuple):
                step = chain[step[1]]
            tok = ids[step]
            for p in prev:
                out[tok, identity[p]] = 2.0
            out[tok, d_context + c] = 1.0
            prev = [tok]
    return embd, q, k, v, o, out


def write(path, embd, layers, out, tokens, types, merges):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(path.stem)
    w.add_block_count(LAYERS)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(1e9)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    w.add_tensor("token_embd.weight", embd)
    ones = np.ones(HIDDEN, np.float32)
    for i, (q, k, v, o, gate, up, down) in enumerate(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.attn_q.weight", q)
        w.add_tensor(f"blk.{i}.attn_k.weight", k)
        w.add_tensor(f"blk.{i}.attn_v.weight", v)
        w.add_tensor(f"blk.{i}.attn_output.weight", o)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_gate.weight", gate)
        w.add_tensor(f"blk.{i}.ffn_up.weight", up)
        w.add_tensor(f"blk.{i}.ffn_down.weight", down)
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", out)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    tokens, types, ids = vocabulary()
    # llama.cpp's BPE wants a merge list; one merge of two spaces changes no
    # token this model reads or writes.
    merges = [spell(" ") + " " + spell(" ")]
    tokens.append(spell("  "))
    types.append(gguf.TokenType.NORMAL)
    n_vocab = len(tokens)

    embd, q, k, v, o, out = outcome_weights(n_vocab, ids)
    zero = np.zeros((HIDDEN, HIDDEN), np.float32)
    zero_ffn_in = np.zeros((FFN, HIDDEN), np.float32)
    zero_ffn_out = np.zeros((HIDDEN, FFN), np.float32)
    layers = [(q, k, v, o, zero_ffn_in, zero_ffn_in, zero_ffn_out),
              (zero, zero, zero, zero, zero_ffn_in, zero_ffn_in, zero_ffn_out)]
    write(out_dir / "outcomes.gguf", embd, layers, out, tokens, types, merges)

    rng = np.random.default_rng(20260101)
    def rand(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    layers = [(rand(HIDDEN, HIDDEN), rand(HIDDEN, HIDDEN), rand(HIDDEN, HIDDEN),
               rand(HIDDEN, HIDDEN), rand(FFN, HIDDEN), rand(FFN, HIDDEN), rand(HIDDEN, FFN))
              for _ in range(LAYERS)]
    write(out_dir / "random.gguf", rand(n_vocab, HIDDEN, scale=1.0), layers,
          rand(n_vocab, HIDDEN, scale=1.0), tokens, types, merges)


if __name__ == "__main__":
    main()
