"""Hardware fit: matrix products, convolutions and attention whose dimensions leave part of a
TPU's matrix unit idle, and float32 products that autocast would run in bfloat16.

A TPU's matrix unit multiplies 128x128 tiles (256x256 on v6e, Trillium): XLA pads a product's
contracted and output-feature dimensions to the tile and its rows to 8 (the sublanes), so an
[M, K] x [K, N] product costs M'K'N' where each is rounded up, and 1 - MKN / (M'K'N') of the unit
sits idle. Time lost is estimated from the chip's figures (peak bfloat16 FLOP/s, memory
bandwidth): on another platform, as if on a TPU v5e.
"""
import collections
import math
import re

import torch

from ._findings import Finding, sentence
from ._signatures import tensor_parts

# (name, matrix unit width, peak bf16 FLOP/s, HBM bytes/s), matched against the device kind.
_CHIPS = [
    ("v6", ("TPU v6e", 256, 918e12, 1640e9)),
    ("v5 lite", ("TPU v5e", 128, 197e12, 819e9)),
    ("v5e", ("TPU v5e", 128, 197e12, 819e9)),
    ("v5", ("TPU v5p", 128, 459e12, 2765e9)),
    ("v4", ("TPU v4", 128, 275e12, 1228e9)),
]
_DEFAULT_CHIP = ("TPU v5e", 128, 197e12, 819e9)
_MATMULS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear"}
_CONVOLUTIONS = {"convolution", "_convolution", "conv2d", "conv1d", "conv3d"}


def chip():
    """(name, width, flops, bandwidth, measured): the chip the estimates are for."""
    kind = ""
    try:
        if torch.tpu.platform() == "tpu":
            kind = torch.tpu.get_device_name().lower()
    except RuntimeError:
        pass
    for key, figures in _CHIPS:
        if key in kind:
            return figures + (True,)
    return _DEFAULT_CHIP + (False,)


def _up(n, multiple):
    return math.ceil(n / multiple) * multiple if n > 0 else 0


def idle_share(m, k, n, width):
    """The share of the matrix unit left idle by padding an [m, k] x [k, n] product."""
    padded = _up(m, 8) * _up(k, width) * _up(n, width)
    return 1 - (m * k * n) / padded if padded else 0.0


def product_dims(op, sig):
    """(batch, m, k, n, dtype, repeat) of a product's signature, or None. `repeat` multiplies
    the cost (a convolution's kernel window and groups)."""
    tensors = tensor_parts(sig)
    if op in ("addmm", "baddbmm", "addbmm"):
        tensors = tensors[1:]
    if op in _CONVOLUTIONS:
        if len(tensors) < 2 or len(tensors[0][2]) < 3:
            return None
        (_, dtype, x), (_, _, w) = tensors[0], tensors[1]
        groups = dict(sig).get("groups", 1) or 1
        window = math.prod(w[2:])
        spatial = math.prod(x[2:]) if len(x) > 2 else 1
        return 1, x[0] * spatial, x[1] // groups, w[0] // groups, dtype, window * groups
    if len(tensors) < 2:
        return None
    (_, dtype, a), (_, _, b) = tensors[0], tensors[1]
    if len(a) < 2 or len(b) < 2:
        return None
    if op == "linear":
        return 1, math.prod(a[:-1]), a[-1], b[0], dtype, 1
    if op == "addbmm":
        return 1, a[-2], a[-1] * a[0], b[-1], dtype, 1
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    return batch, a[-2], a[-1], b[-1], dtype, 1


def _group_name(module):
    # Layers of one stack share their findings: blocks.layers.0..3.linear1 -> blocks.layers.*.linear1
    return re.sub(r"\.\d+(?=\.|$)", ".*", module) if module else None


def _product_sites(sites):
    """Forward products with their dims, grouped by (kind, module group or line, dims)."""
    groups = collections.OrderedDict()
    for site in sites:
        if site.backward or site.role == "attention values":
            continue
        if site.op not in _MATMULS and site.op not in _CONVOLUTIONS:
            continue
        kind = ("attention_shape" if site.role == "attention scores"
                else "conv_shape" if site.op in _CONVOLUTIONS else "matmul_shape")
        for sig, calls in site.signatures.items():
            dims = product_dims(site.op, sig)
            if dims is None:
                continue
            where = _group_name(site.module) or f"{site.file}:{site.line}"
            entry = groups.setdefault((kind, where, site.op, dims), {"sites": [], "calls": 0})
            entry["calls"] += calls
            if site not in entry["sites"]:
                entry["sites"].append(site)
    return groups


def _flops(batch, m, k, n, repeat):
    return 2 * batch * m * k * n * repeat


def _training(entry, sites):
    """3 where the product's operands need gradients and a backward pass ran: its two gradient
    products cost as much again each."""
    return 3 if any(s.requires_grad for s in entry["sites"]) and any(s.backward for s in sites) else 1


def shape_findings(sites):
    name, width, flops_per_s, _, measured = chip()
    target = name if measured else f"a {name} (estimated; this run is not on a TPU)"
    findings = []
    for (kind, where, op, dims), entry in _product_sites(sites).items():
        batch, m, k, n, dtype, repeat = dims
        share128, share256 = idle_share(m, k, n, 128), idle_share(m, k, n, 256)
        # A multiple of 128 that is not one of 256 only leaves the 256-wide units of the newest
        # chips idle: a finding there, the figure everywhere.
        if share128 <= 0 and (width != 256 or share256 <= 0):
            continue
        share = share256 if width == 256 else share128
        site = entry["sites"][0]
        training = _training(entry, sites)
        lost_flops = _flops(batch, m, k, n, repeat) * (1 / (1 - share) - 1) if share < 1 else 0
        seconds = lost_flops * entry["calls"] * training / flops_per_s
        modules = sorted({s.module for s in entry["sites"] if s.module})
        label = f" in {where}" if modules else ""
        details = {"op": op, "m": m, "k": k, "n": n, "batch": batch, "dtype": dtype, "calls": entry["calls"],
                   "idle_share_128": share128, "idle_share_256": share256, "modules": modules}
        findings.append(_shape_finding(kind, label, dims, share128, share256, details, seconds,
                                       f"padded FLOPs at {target}'s peak bfloat16 rate"
                                       + (", x3 for the backward pass" if training > 1 else ""), site))
    return findings


def _shape_finding(kind, label, dims, share128, share256, details, seconds, estimate, site):
    batch, m, k, n, dtype, repeat = dims
    module = _group_name(site.module)
    odd = lambda v: v % 128 != 0  # noqa: E731
    shares = f"{share128:.0%} of a 128-wide matrix unit idle, {share256:.0%} of a 256-wide one"
    if kind == "attention_shape":
        details.update(head_dim=k, query_length=m, key_length=n)
        fixes = []
        if k % 128:
            fixes.append(f"pad the head dimension to {_up(k, 128)} (zero columns in q, k and v change no "
                         f"result; keep the softmax scale 1/sqrt({k})) or use fewer, wider heads")
        elif k % 256:
            fixes.append(f"a head dimension of {_up(k, 256)} fills the 256-wide units of the newest chips")
        if odd(n) or m % 8:
            fixes.append("pad the sequence length to a multiple of 128 (mask the padding)")
        return Finding(kind, f"attention{label}: head dimension {k}, sequence {m}x{n} ({shares})",
                       sentence("; ".join(fixes)), seconds, estimate, site.file, site.line,
                       module, details["calls"], details)
    if kind == "conv_shape":
        title = f"convolution{label}: {k} -> {n} channels ({shares})"
        fix = "use channel counts that are multiples of 128 (256 on the newest chips)"
    else:
        title = f"{details['op']}{label}: [{m}, {k}] x [{k}, {n}]" + (f" x{batch}" if batch > 1 else "") + \
                f" ({shares})"
        parts = [f"{name} {v} -> {_up(v, 128)}" for name, v in (("K", k), ("N", n)) if odd(v)]
        if m % 8:
            parts.append(f"rows {m} -> {_up(m, 8)}")
        if not parts:
            parts = [f"{name} {v} -> {_up(v, 256)}" for name, v in (("K", k), ("N", n)) if v % 256]
        fix = "pad or resize the layer's dimensions (" + ", ".join(parts) + ")"
        if m % 8 and not odd(k) and not odd(n):
            fix += ": the batch times sequence length sets the rows"
    return Finding(kind, title, sentence(fix), seconds, estimate, site.file, site.line,
                   module, details["calls"], details)


def float32_findings(sites):
    """Float32 products, one finding per line and model: autocast's lower-precision list would
    run them in bfloat16, halving the bytes they move (a TPU multiplies float32 at bfloat16 speed
    at default precision)."""
    name, _, _, bandwidth, measured = chip()
    target = name if measured else f"a {name} (estimated; this run is not on a TPU)"
    groups = collections.OrderedDict()
    for (kind, where, op, dims), entry in _product_sites(sites).items():
        batch, m, k, n, dtype, repeat = dims
        if dtype != "float32" or any(s.upcast for s in entry["sites"]):
            continue
        site = entry["sites"][0]
        moved = 4 * batch * (m * k + k * n + m * n) * (2 if kind == "attention_shape" else 1)
        training = _training(entry, sites)
        root = site.module.split(".")[0] if site.module else None
        group = groups.setdefault((site.file, site.line, root), {"site": site, "products": [], "seconds": 0.0,
                                                                  "calls": 0, "training": 1})
        group["seconds"] += moved / 2 * entry["calls"] * training / bandwidth
        group["calls"] += entry["calls"]
        group["training"] = max(group["training"], training)
        what = "attention" if kind == "attention_shape" else op
        group["products"].append(f"{what}" + (f" in {where}" if site.module else "") + f" [{m}, {k}] x [{k}, {n}]")
    findings = []
    for (file, line, root), group in groups.items():
        products = group["products"]
        title = (f"float32 {products[0]}" if len(products) == 1 else
                 f"{len(products)} float32 products" + (f" in {root}" if root else ""))
        findings.append(Finding(
            "float32_matmul", title,
            "Run it under torch.autocast('tpu', dtype=torch.bfloat16) (or keep the weights in bfloat16): "
            "autocast runs matmuls, linear layers, convolutions and attention in bfloat16 and keeps "
            "reductions, softmax and losses in float32." + (f" The products: {'; '.join(products)}."
                                                            if len(products) > 1 else ""),
            group["seconds"], f"half the bytes their operands and results move, at {target}'s memory "
            "bandwidth" + (", x3 for the backward pass" if group["training"] > 1 else ""),
            file, line, group["site"].module if len(products) == 1 else root, group["calls"],
            {"products": products}))
    return findings
