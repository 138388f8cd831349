"""llama.cpp, the peer of colibri-bench: the benchmark's model written as an
F32 GGUF (the `gguf` package), and llama-bench run on it.

The GGUF holds the same weights as the Colibri image, laid out as llama.cpp's
own converter lays out a Mixtral checkpoint: architecture "llama" with
stacked expert tensors, q/k rows permuted for llama.cpp's RoPE pairing, no
tokenizer (llama-bench feeds random token ids; "none" with the vocabulary
size is what llama.cpp accepts for that).
"""
from __future__ import annotations

import json
import pathlib
import subprocess

import numpy as np

from ..errors import ColibriError


class LlamaBenchError(ColibriError):
    """llama-bench is missing or failed, or the model cannot be written as GGUF."""


def _permute_rope(w: np.ndarray, heads: int) -> np.ndarray:
    """Rows of a q/k projection from rotate-half order to llama.cpp's
    interleaved pairs (what convert_hf_to_gguf.py does for llama)."""
    rows, cols = w.shape
    return w.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _layer_tensors(sd: dict, i: int, cfg) -> dict[str, np.ndarray]:
    p, inter = f"model.layers.{i}.", cfg.intermediate_size
    gate_up = sd[p + "mlp.experts.gate_up_proj"]
    return {
        "attn_norm.weight": sd[p + "input_layernorm.weight"],
        "attn_q.weight": _permute_rope(sd[p + "self_attn.q_proj.weight"], cfg.num_attention_heads),
        "attn_k.weight": _permute_rope(sd[p + "self_attn.k_proj.weight"], cfg.num_key_value_heads),
        "attn_v.weight": sd[p + "self_attn.v_proj.weight"],
        "attn_output.weight": sd[p + "self_attn.o_proj.weight"],
        "ffn_norm.weight": sd[p + "post_attention_layernorm.weight"],
        "ffn_gate_inp.weight": sd[p + "mlp.gate.weight"],
        "ffn_gate_exps.weight": np.ascontiguousarray(gate_up[:, :inter, :]),
        "ffn_up_exps.weight": np.ascontiguousarray(gate_up[:, inter:, :]),
        "ffn_down_exps.weight": sd[p + "mlp.experts.down_proj"],
    }


def byte_level(text: str) -> str:
    """A token's text in the byte-level alphabet llama.cpp's BPE tokenizer
    matches merges in (GPT-2's: each UTF-8 byte one printable character)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1),
                 *range(ord("\xae"), ord("\xff") + 1)]
    extra = iter(range(256, 512))
    table = {b: chr(b) if b in printable else chr(next(extra)) for b in range(256)}
    return "".join(table[b] for b in text.encode("utf-8"))


def gguf_vocab(tokenizer_json: pathlib.Path) -> dict:
    """The tokens, types and merges of a `tokenizers` BPE (colibri-train-tiny's)
    in byte-level form, so that llama.cpp's "gpt2" tokenizer encodes text with
    them (its pre-tokenizer splits words with their leading space as
    colibri-train-tiny's does); special tokens are control tokens."""
    data = json.loads(pathlib.Path(tokenizer_json).read_text("utf-8"))
    vocab = data["model"]["vocab"]
    special = {t["id"] for t in data.get("added_tokens", []) if t.get("special")}
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text if i in special else byte_level(text)
    merges = [m.split(" ", 1) if isinstance(m, str) else m for m in data["model"]["merges"]]
    return {"tokens": tokens, "types": [3 if i in special else 1 for i in range(len(tokens))],
            "merges": [f"{byte_level(a)} {byte_level(b)}" for a, b in merges]}


def _add_vocab(w, cfg, tokenizer_json: pathlib.Path | None) -> None:
    if tokenizer_json is None:
        w.add_tokenizer_model("none")
        return
    vocab = gguf_vocab(tokenizer_json)
    if len(vocab["tokens"]) != cfg.vocab_size:
        raise LlamaBenchError(f"{tokenizer_json}: {len(vocab['tokens'])} tokens, the model "
                              f"has {cfg.vocab_size}")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["types"])
    w.add_token_merges(vocab["merges"])
    w.add_bos_token_id(cfg.bos_token_id if cfg.bos_token_id is not None else 0)
    w.add_eos_token_id(cfg.eos_token_id if cfg.eos_token_id is not None else 0)
    w.add_add_bos_token(False)


def write_gguf(model, path: pathlib.Path, tokenizer_json: pathlib.Path | None = None) -> pathlib.Path:
    """Write a transformers Mixtral model as an F32 GGUF at path; with
    tokenizer_json (a `tokenizers` BPE) its vocabulary too (for llama-imatrix),
    else none (llama-bench and llama_logits take token ids)."""
    import gguf

    cfg = model.config
    if cfg.model_type != "mixtral":
        raise LlamaBenchError(f"the llama.cpp peer takes a mixtral model, not {cfg.model_type}")
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 1e6)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("colibri-bench")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(cfg.vocab_size)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_expert_count(cfg.num_local_experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    _add_vocab(w, cfg, tokenizer_json)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        for name, array in _layer_tensors(sd, i, cfg).items():
            w.add_tensor(f"blk.{i}.{name}", np.ascontiguousarray(array, dtype=np.float32))
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def run_llama_bench(binary: pathlib.Path, gguf_path: pathlib.Path, prompt: int, gen: int,
                    threads: int, timeout: float = 1800) -> dict:
    """One llama-bench run (one repetition of a prompt and a decode test):
    {"prompt_tok_s": ..., "decode_tok_s": ...}."""
    cmd = [str(binary), "-m", str(gguf_path), "-p", str(prompt), "-n", str(gen),
           "-t", str(threads), "-r", "1", "-o", "jsonl"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlamaBenchError(f"{binary}: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise LlamaBenchError(f"{binary} failed (exit {done.returncode}):\n{tail}")
    result = parse_llama_bench(done.stdout)
    if set(result) != {"prompt_tok_s", "decode_tok_s"}:
        raise LlamaBenchError(f"{binary}: no prompt and decode results in its output")
    return result


def parse_llama_bench(stdout: str) -> dict:
    """llama-bench -o jsonl's rows as {"prompt_tok_s": ..., "decode_tok_s": ...}
    (those it printed)."""
    result = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            key = "prompt_tok_s" if row.get("n_gen", 0) == 0 else "decode_tok_s"
            result[key] = float(row["avg_ts"])
    return result


# --quant NAME -> the llama.cpp type of the same bit width (llama-quantize's name);
# the super-blocks beside the K-quants (Q3_K_M .. Q5_K_M: the mixes llama.cpp's
# users pick, which keep some matrices a width up, as Colibri keeps K, V and the head QK6)
LLAMA_TYPES = {"int8": "Q8_0", "int4": "Q4_0", "qk2": "Q2_K", "qk3": "Q3_K_M", "qk4": "Q4_K_M",
               "qk5": "Q5_K_M", "qk6": "Q6_K"}
LOGITS_SOURCE = pathlib.Path(__file__).resolve().parents[3] / "bench" / "llama_logits.c"


def peer_tool(llama_bench: pathlib.Path, name: str) -> pathlib.Path:
    """Another program of the llama-bench's build (same directory), or a clear
    error naming the command that builds it."""
    path = llama_bench.parent / name
    if not path.is_file():
        build = llama_bench.parent.parent
        raise LlamaBenchError(f"{path} not found: build it beside llama-bench with "
                              f"`cmake --build {build} --target {name} -j2`")
    return path


def quantize_gguf(llama_bench: pathlib.Path, f32: pathlib.Path, kind: str, pure: bool = False,
                  imatrix: pathlib.Path | None = None, timeout: float = 1800) -> pathlib.Path:
    """llama-quantize F32 -> kind (Q8_0, Q4_0, Q3_K_M, ...) with its defaults, as
    a user of that llama.cpp build would (Q4_0 then stores the output matrix
    Q6_K), or with `pure` every matrix as kind; with `imatrix` (llama-imatrix's
    file) importance-weighted; the result sits beside f32."""
    tag = ("-pure" if pure else "") + ("-imat" if imatrix else "")
    out = f32.with_name(f"{f32.stem}-{kind.lower()}{tag}.gguf")
    cmd = [str(peer_tool(llama_bench, "llama-quantize")), *(["--pure"] if pure else []),
           *(["--imatrix", str(imatrix)] if imatrix else []), str(f32), str(out), kind]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise LlamaBenchError(f"llama-quantize {kind} failed (exit {done.returncode}):\n{tail}")
    return out


def make_imatrix(llama_bench: pathlib.Path, f32: pathlib.Path, text: pathlib.Path, context: int,
                 threads: int = 1, timeout: float = 3600) -> pathlib.Path:
    """llama-imatrix's importance matrix of the F32 GGUF (which must hold a
    vocabulary: write_gguf's tokenizer_json) over `text` in chunks of
    `context` tokens; beside f32."""
    out = f32.with_name(f"{f32.stem}-imatrix.gguf")
    cmd = [str(peer_tool(llama_bench, "llama-imatrix")), "-m", str(f32), "-f", str(text),
           "-o", str(out), "-c", str(context), "-t", str(threads), "--no-ppl"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not out.is_file():
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise LlamaBenchError(f"llama-imatrix failed (exit {done.returncode}):\n{tail}")
    return out


def gguf_sizes(path: pathlib.Path) -> dict:
    """Bytes of the whole GGUF file, and bytes and weights of its routed
    expert matrices (the *_exps tensors)."""
    import gguf

    experts = [t for t in gguf.GGUFReader(str(path)).tensors if t.name.endswith("_exps.weight")]
    return {"bytes": path.stat().st_size, "expert_bytes": sum(int(t.n_bytes) for t in experts),
            "expert_weights": sum(int(t.n_elements) for t in experts)}


def build_llama_logits(llama_bench: pathlib.Path, out_dir: pathlib.Path) -> pathlib.Path:
    """Compile bench/llama_logits.c against the peer's llama.h and
    libllama (the tree build-llama-bench made: DIR/src, DIR/build/bin)."""
    peer = llama_bench.parent.parent.parent
    src, lib = peer / "src", llama_bench.parent
    if not (src / "include" / "llama.h").is_file():
        raise LlamaBenchError(f"{src / 'include' / 'llama.h'} not found: the fidelity check "
                              "needs the source tree build-llama-bench keeps beside its build")
    exe = out_dir / "llama_logits"
    cmd = ["cc", "-O2", "-std=c11", f"-I{src / 'include'}", f"-I{src / 'ggml' / 'include'}",
           str(LOGITS_SOURCE), "-o", str(exe), f"-L{lib}", f"-Wl,-rpath,{lib}", "-lllama",
           "-lggml", "-lggml-base"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise LlamaBenchError(f"cannot build llama_logits:\n{done.stderr.strip()[-2000:]}")
    return exe


def llama_logits(exe: pathlib.Path, gguf_path: pathlib.Path, ids: list[int], vocab: int,
                 threads: int = 1, timeout: float = 600) -> np.ndarray:
    """llama.cpp's logits [len(ids), vocab] for one prompt, in one batch."""
    out = gguf_path.with_suffix(".logits.f32")
    cmd = [str(exe), str(gguf_path), str(out), str(threads), str(vocab), *map(str, ids)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlamaBenchError(f"{exe}: {exc}") from exc
    if done.returncode != 0:
        raise LlamaBenchError(f"{exe} failed (exit {done.returncode}): {done.stderr.strip()}")
    data = np.fromfile(out, dtype="<f4")
    out.unlink()
    if data.size != len(ids) * vocab:
        raise LlamaBenchError(f"{exe} wrote {data.size} logits, not {len(ids)} x {vocab}")
    return data.reshape(len(ids), vocab)
