#!/usr/bin/env python3
"""Export a Hugging Face decoder LM as a fugu decoder backbone (ONNX).

The exported model meets the contract in infra/export/README.md ("The contract"):

    input_ids       int64   [B, T]  right-padded token ids
    attention_mask  int64   [B, T]  1 on the valid positions 0 .. n-1, 0 after
    z_<name>        float32 [R]     SVF vector of adapted matrix <name> of layer L
    hidden          float32 [B, H]  residual stream after decoder layer L (1-based, no final
                                    norm) at position max(min(n, max_len) - 2, 0): the
                                    PENULTIMATE token of the prefix truncated to max_len

How it is built:
  1. load the model in float32 (eager attention: it traces cleanly);
  2. record reference hidden states of the ORIGINAL model (a forward hook on layer L);
  3. keep decoder layers 1..L only, drop the final norm, and replace each adapted nn.Linear of
     layer L with its SVF reparametrisation W'(z) = U diag(S z c) V^T, c = sum(S) / sum(S z)
     (Transformer-Squared), U, S, V^T baked in as initializers and z a graph input;
  4. wrap it in `DecoderBackbone` (truncate, run, take the penultimate valid position) and
     export with torch.onnx.export (TorchScript exporter, dynamic B and T);
  5. store weights as external data (model.onnx + model.onnx.data), write metadata_props, save
     the tokenizer files next to the model, and write reference.json;
  6. verify with ONNX Runtime: ONNX vs torch (random z) and ONNX (z = 1) vs the original model,
     each sentence alone and all of them batched with padding; print max abs differences.

Example (see README.md for the exact commands):
    python export_decoder.py --model Qwen/Qwen3-0.6B --layer 20 --max-len 512 \
        --adapt q_proj,o_proj --out out/qwen3-0.6b-l20
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer

CONTRACT_VERSION = "fugu-decoder-backbone/1"
OPSET = 17

VERIFY_SENTENCES = [
    "Route this question to the best model.",
    "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)",
    "Solve for x: 3x + 7 = 22.",
    "Quelle est la capitale de l'Australie ?",
    "写一首关于秋天的短诗。",
    "ok",
    "Summarise the following paragraph in one sentence: the quick brown fox jumps over the lazy "
    "dog, again and again, until the dog finally wakes up and chases it across the field.",
]


# --- SVF ------------------------------------------------------------------------------------


class SvfLinear(nn.Module):
    """An nn.Linear (y = x W^T + b, W [out, in]) reparametrised by its SVD W = U diag(S) V^T:

        y = ((x V) * (S * z * c)) U^T + b,   c = sum(S) / sum(S * z)

    U [out, R], S [R], Vh = V^T [R, in] are buffers (ONNX initializers); z [R] is set by the
    wrapper before each forward (it is a graph input). z = 1 gives W back (up to float32
    rounding of the factors). The SVD is computed once, in float64.
    """

    def __init__(self, linear: nn.Linear, name: str):
        super().__init__()
        self.name = name
        weight = linear.weight.detach().to(torch.float64)
        U, S, Vh = torch.linalg.svd(weight, full_matrices=False)
        self.register_buffer("U", U.to(torch.float32).contiguous())
        self.register_buffer("S", S.to(torch.float32).contiguous())
        self.register_buffer("Vh", Vh.to(torch.float32).contiguous())
        bias = linear.bias.detach().to(torch.float32).clone() if linear.bias is not None else None
        self.register_buffer("bias", bias)
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.rank = int(S.shape[0])
        self.z: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.z is None:
            raise RuntimeError(f"SvfLinear {self.name}: z was not set before the forward pass")
        sz = self.S * self.z
        scale = sz * (self.S.sum() / sz.sum())  # S z c
        y = torch.matmul(torch.matmul(x, self.Vh.t()) * scale, self.U.t())
        return y + self.bias if self.bias is not None else y


def find_linear(layer: nn.Module, short: str) -> tuple[nn.Module, str, nn.Linear]:
    """The unique nn.Linear of `layer` whose dotted name is `short` or ends with `.short`."""
    matches = [(n, m) for n, m in layer.named_modules() if (n == short or n.endswith("." + short)) and isinstance(m, nn.Linear)]
    if len(matches) != 1:
        linears = [n for n, m in layer.named_modules() if isinstance(m, nn.Linear)]
        raise SystemExit(f"--adapt {short}: expected one nn.Linear named like it in the layer, found {len(matches)}; the layer's linears are {', '.join(linears)}")
    full, linear = matches[0]
    parent = layer.get_submodule(full.rsplit(".", 1)[0]) if "." in full else layer
    return parent, full.rsplit(".", 1)[-1], linear


# --- the contract wrapper -------------------------------------------------------------------


class DecoderBackbone(nn.Module):
    """input_ids, attention_mask (right-padded), z_* -> hidden [B, H] at the penultimate valid token."""

    def __init__(self, base: nn.Module, layer: int, max_len: int, svf: list[SvfLinear]):
        super().__init__()
        self.base = base  # the inner decoder (model.model), already cut to `layer` layers
        self.layer = layer
        self.max_len = max_len
        self.svf = nn.ModuleList(svf)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *z: torch.Tensor) -> torch.Tensor:
        for module, zi in zip(self.svf, z, strict=True):
            module.z = zi
        ids = input_ids[:, : self.max_len]
        mask = attention_mask[:, : self.max_len]
        # Right padding + causal attention: valid positions never see the padding after them, so
        # the mask is not passed to the model (it only picks the position) and positions are
        # 0 .. n-1 with the default position ids.
        out = self.base(input_ids=ids, use_cache=False, return_dict=True)
        h = out.last_hidden_state  # the final norm is an Identity: raw output of layer L
        n = mask.sum(dim=1)
        at = torch.clamp(n - 2, min=0)  # penultimate valid token (the only one when n = 1)
        index = at.view(-1, 1, 1).expand(-1, 1, h.shape[-1])
        return torch.gather(h, 1, index).squeeze(1)


def reference_hidden(base: nn.Module, layer: int, ids: list[list[int]]) -> list[np.ndarray]:
    """Hidden states of the ORIGINAL decoder (hook on layer L), one unpadded sentence at a time."""
    captured: dict[str, torch.Tensor] = {}

    def hook(_module, _inputs, output):
        captured["h"] = output[0] if isinstance(output, tuple) else output

    handle = base.layers[layer - 1].register_forward_hook(hook)
    rows = []
    try:
        with torch.no_grad():
            for seq in ids:
                base(input_ids=torch.tensor([seq]), use_cache=False)
                rows.append(captured["h"][0, max(len(seq) - 2, 0)].numpy().copy())
    finally:
        handle.remove()
    return rows


def pad_right(seqs: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    T = max(1, max(len(s) for s in seqs))
    ids = np.full((len(seqs), T), pad_id, dtype=np.int64)
    mask = np.zeros((len(seqs), T), dtype=np.int64)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = s
        mask[b, : len(s)] = 1
    return ids, mask


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="Qwen/Qwen3-0.6B", help="HF model id or local directory (default Qwen/Qwen3-0.6B)")
    p.add_argument("--revision", default=None, help="HF revision (commit) to pin")
    p.add_argument("--layer", type=int, required=True, help="L: 1-based decoder layer whose output is `hidden`")
    p.add_argument("--max-len", type=int, default=512, help="prefix length in tokens (default 512)")
    p.add_argument("--adapt", default="q_proj,o_proj", help="comma-separated linear layers of layer L to SVF-adapt, e.g. q_proj,o_proj,down_proj ('' for none)")
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--verify-provider", default="CPUExecutionProvider", help="ONNX Runtime provider for verification (CUDAExecutionProvider on a GPU)")
    p.add_argument("--tolerance", type=float, default=1e-3, help="max abs difference ONNX vs torch that passes (default 1e-3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random z used in verification")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    if args.max_len < 2:
        raise SystemExit("--max-len must be at least 2")
    adapt = [a.strip() for a in args.adapt.split(",") if a.strip()]
    for a in adapt:
        if not re.fullmatch(r"[A-Za-z0-9_]+", a):
            raise SystemExit(f"--adapt {a}: names are [A-Za-z0-9_] (the ONNX input is z_<name>)")
    if len(set(adapt)) != len(adapt):
        raise SystemExit("--adapt lists a matrix twice")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    print(f"loading {args.model} (float32, eager attention)")
    tokenizer = AutoTokenizer.from_pretrained(args.model, revision=args.revision)
    model = AutoModelForCausalLM.from_pretrained(args.model, revision=args.revision, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    config = model.config
    base = model.model  # the decoder stack: embed_tokens, layers, norm, rotary_emb
    num_layers = len(base.layers)
    if not 1 <= args.layer <= num_layers:
        raise SystemExit(f"--layer must be in 1..{num_layers} for {args.model}, got {args.layer}")
    hidden_size = int(config.hidden_size)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)

    verify_ids = [tokenizer(t)["input_ids"][: args.max_len] for t in VERIFY_SENTENCES]
    reference = reference_hidden(base, args.layer, verify_ids)

    # Cut to layers 1..L, no final norm, SVF on the chosen linears of layer L.
    base.layers = base.layers[: args.layer]
    base.config.num_hidden_layers = args.layer
    base.norm = nn.Identity()
    svf: list[SvfLinear] = []
    for short in adapt:
        parent, attr, linear = find_linear(base.layers[args.layer - 1], short)
        module = SvfLinear(linear, short)
        setattr(parent, attr, module)
        svf.append(module)
        print(f"  SVF {short}: [{module.out_features} x {module.in_features}], rank {module.rank}")
    wrapper = DecoderBackbone(base, args.layer, args.max_len, svf).eval()
    del model  # the LM head is not needed any more

    # Export. The dummy batch is right-padded and its T differs from the verification batches,
    # so a shape baked into the trace would show up as a verification failure.
    dummy_ids, dummy_mask = pad_right([[1, 2, 3, 4, 5], [6, 7, 8]], pad_id)
    ones = [torch.ones(m.rank) for m in svf]
    input_names = ["input_ids", "attention_mask"] + [f"z_{m.name}" for m in svf]
    dynamic_axes = {"input_ids": {0: "B", 1: "T"}, "attention_mask": {0: "B", 1: "T"}, "hidden": {0: "B"}}
    with tempfile.TemporaryDirectory() as tmp:
        raw_path = Path(tmp) / "raw.onnx"
        t0 = time.time()
        with torch.no_grad():
            torch.onnx.export(
                wrapper,
                (torch.from_numpy(dummy_ids), torch.from_numpy(dummy_mask), *ones),
                str(raw_path),
                input_names=input_names,
                output_names=["hidden"],
                dynamic_axes=dynamic_axes,
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
        print(f"exported in {time.time() - t0:.1f} s")
        proto = onnx.load(str(raw_path))  # also loads any external data torch wrote

    metadata = {
        "contract": CONTRACT_VERSION,
        "backbone_kind": str(config.model_type),
        "source_model": args.model + (f"@{args.revision}" if args.revision else ""),
        "hidden_size": str(hidden_size),
        "layer": str(args.layer),
        "num_layers": str(num_layers),
        "max_len": str(args.max_len),
        "vocab_size": str(int(config.vocab_size)),
        "adapted": json.dumps([{"name": m.name, "rank": m.rank, "rows": m.out_features, "cols": m.in_features} for m in svf]),
        "tokenizer": args.model,
        "pad_token_id": str(pad_id),
        "padding_side": "right",
        "decision_position": "penultimate",
        "svf_rescale": "sum(S)/sum(S*z)",
    }
    onnx.helper.set_model_props(proto, metadata)
    model_path = out / "model.onnx"
    data_name = "model.onnx.data"
    (out / data_name).unlink(missing_ok=True)  # save_model appends to an existing data file
    onnx.save_model(proto, str(model_path), save_as_external_data=True, all_tensors_to_one_file=True, location=data_name, size_threshold=1024)
    onnx.checker.check_model(str(model_path))
    tokenizer.save_pretrained(str(out))  # tokenizer.json (+ config files) next to the model
    print(f"wrote {model_path} (+ {data_name}) and the tokenizer files to {out}")

    ok = verify(wrapper, model_path, svf, verify_ids, reference, pad_id, args)
    write_reference(out / "reference.json", model_path, svf, verify_ids, pad_id, args.verify_provider)
    return 0 if ok else 1


def run_onnx(session: ort.InferenceSession, seqs: list[list[int]], z: list[np.ndarray], svf: list[SvfLinear], pad_id: int) -> np.ndarray:
    ids, mask = pad_right(seqs, pad_id)
    feeds = {"input_ids": ids, "attention_mask": mask}
    feeds.update({f"z_{m.name}": zi.astype(np.float32) for m, zi in zip(svf, z, strict=True)})
    return session.run(["hidden"], feeds)[0]


def verify(wrapper: DecoderBackbone, model_path: Path, svf: list[SvfLinear], seqs: list[list[int]], reference: list[np.ndarray], pad_id: int, args: argparse.Namespace) -> bool:
    """ONNX vs torch wrapper (random z), ONNX (z = 1) vs the original model; alone and batched."""
    session = ort.InferenceSession(str(model_path), providers=[args.verify_provider])
    ones = [np.ones(m.rank, dtype=np.float32) for m in svf]
    rand = [np.asarray(1 + 0.2 * torch.randn(m.rank).numpy(), dtype=np.float32) for m in svf]

    with torch.no_grad():
        ids, mask = pad_right(seqs, pad_id)
        torch_rand = wrapper(torch.from_numpy(ids), torch.from_numpy(mask), *[torch.from_numpy(z) for z in rand]).numpy()

    worst = 0.0
    print(f"verification on {args.verify_provider}, {len(seqs)} sentences, max abs difference:")
    batched_rand = run_onnx(session, seqs, rand, svf, pad_id)
    d = float(np.abs(batched_rand - torch_rand).max())
    print(f"  ONNX vs torch, random z, batched with padding: {d:.3e}")
    worst = max(worst, d)
    batched_ones = run_onnx(session, seqs, ones, svf, pad_id)
    for i, s in enumerate(seqs):
        alone = run_onnx(session, [s], ones, svf, pad_id)[0]
        d_ref = float(np.abs(alone - reference[i]).max())
        d_pad = float(np.abs(alone - batched_ones[i]).max())
        scale = float(np.abs(reference[i]).max())
        print(f"  [{i}] {len(s):4d} tokens: z=1 vs original model {d_ref:.3e} (|h|max {scale:.2f}), alone vs batched {d_pad:.3e}")
        worst = max(worst, d_ref / max(1.0, scale), d_pad)
    if svf:
        d_z = float(np.abs(batched_rand - batched_ones).max())
        print(f"  random z moves the output by {d_z:.3e} (must be > 0)")
        if not d_z > 0:
            print("FAILED: z has no effect on the output")
            return False
    ok = math.isfinite(worst) and worst <= args.tolerance
    print(("OK" if ok else "FAILED") + f": worst {worst:.3e} (tolerance {args.tolerance}; the original-model check is relative to max(1, |h|max))")
    return ok


def write_reference(path: Path, model_path: Path, svf: list[SvfLinear], seqs: list[list[int]], pad_id: int, provider: str) -> None:
    """Token ids and ONNX hidden states (z = 1) of the verification sentences: lets the Node side
    check its tokenizer.json reader and its loader end to end."""
    session = ort.InferenceSession(str(model_path), providers=[provider])
    hidden = run_onnx(session, seqs, [np.ones(m.rank, dtype=np.float32) for m in svf], svf, pad_id)
    path.write_text(json.dumps({"texts": VERIFY_SENTENCES, "input_ids": seqs, "hidden": hidden.astype(float).round(6).tolist()}, ensure_ascii=False))
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
