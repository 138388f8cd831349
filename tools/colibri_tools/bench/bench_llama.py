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


def write_gguf(model, path: pathlib.Path) -> pathlib.Path:
    """Write a transformers Mixtral model as an F32 GGUF at path."""
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
    w.add_tokenizer_model("none")
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


# --quant NAME -> the llama.cpp type of the same bit width (llama-quantize's name)
LLAMA_TYPES = {"int8": "Q8_0", "int4": "Q4_0"}
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
                  timeout: float = 1800) -> pathlib.Path:
    """llama-quantize F32 -> kind (Q8_0, Q4_0) with its defaults, as a user of
    that llama.cpp build would (Q4_0 then stores the output matrix Q6_K), or
    with `pure` every matrix as kind; the result sits beside f32."""
    out = f32.with_name(f"{f32.stem}-{kind.lower()}{'-pure' if pure else ''}.gguf")
    cmd = [str(peer_tool(llama_bench, "llama-quantize")), *(["--pure"] if pure else []),
           str(f32), str(out), kind]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise LlamaBenchError(f"llama-quantize {kind} failed (exit {done.returncode}):\n{tail}")
    return out


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
