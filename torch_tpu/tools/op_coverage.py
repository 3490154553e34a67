"""Op coverage of the tpu device against PyTorch's OpInfo database.

    python -m torch_tpu.tools.op_coverage [--mode strict|debug|defer_and_fuse] [--ops a,b]
        [--dtypes float32,int64] [--max-samples N] [--no-backward] [--no-out] [--no-noncontiguous]
        [--jobs N] [--timeout S] [--out DIR] [--rerender]

Every OpInfo in op_db that supports float32 on CPU runs its sample inputs on tpu and on CPU
(generated on CPU, copied to tpu) in the chosen eager mode: forward for each dtype asked for
that the op supports, and backward (gradients for fixed output seeds) for each floating dtype asked
for where the op supports autograd in it. float32 decides every pass figure; bf16 / f16 are
reported beside it, agreeing with CPU when no farther than CPU from float64. In float32, as
PyTorch's test_ops.py does, each op that supports out= also runs with out= tensors (the values,
and that the op returns them in place), and the non-contiguous version of each sample runs forward
and backward; both are reported in columns of their own and decide no other figure. Each op runs
in a worker process, so a crash or a hang (--timeout seconds) costs that op only.

Writes DIR/op_coverage.md (one row per op) and DIR/op_coverage.json (everything), prints progress
to stderr and, on the last line of stdout, JSON with the totals:
  ops_total, ops_pass (every float32 forward sample agrees with CPU), ops_native (those that also
  ran no op through the CPU fallback), core_total / core_pass / core_native (the same outside
  linalg.*, fft.*, special.*), samples_total / samples_pass (forward samples over all dtypes),
  backward_total / backward_pass (ops whose float32 gradients were checked / agreed everywhere),
  backward_samples_total / backward_samples_pass, backward_by_dtype (for bfloat16 and float16:
  ops / pass / samples_total / samples_pass), the same four for out, noncontiguous and
  noncontiguous_backward, and families: total / pass / native for each of linalg.*, fft.* and
  special.*. --rerender rewrites the report from a saved sweep's JSON.
"""
import argparse
import json
import os
import sys
import time

from torch_tpu.tools import worker_pool


def _worker(args):
    import torch

    import torch_tpu
    from torch_tpu.tools import opinfo_runner as runner

    torch_tpu.set_fallback_warnings(False)
    ops = {runner.op_key(op): op for op in runner.load_ops()[0]}
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    worker_pool.announce_ready()
    for key in worker_pool.jobs():
        op = ops[key]
        start = time.monotonic()
        record = {"op": key, "forward": {}, "backward": None, "backward_by_dtype": {}}
        with torch_tpu.eager_mode(args.mode):
            for dtype in dtypes:
                if dtype not in op.supported_dtypes("cpu"):
                    continue
                out = runner.run_forward(op, dtype, args.max_samples)
                record["forward"][_name(dtype)] = _summary(out)
            if not args.no_backward and runner.supports_backward(op):
                out = runner.run_backward(op, torch.float32, args.max_samples)
                record["backward"] = _summary(out)
            for dtype in runner.REDUCED_PRECISION:
                if not args.no_backward and dtype in dtypes and runner.supports_backward(op, dtype):
                    out = runner.run_backward(op, dtype, args.max_samples)
                    record["backward_by_dtype"][_name(dtype)] = _summary(out)
            if not args.no_out and op.supports_out:
                record["out"] = _summary(runner.run_out(op, torch.float32, args.max_samples))
            if not args.no_noncontiguous:
                out = runner.run_forward(op, torch.float32, args.max_samples, noncontiguous=True)
                record["noncontiguous"] = _summary(out)
                if not args.no_backward and runner.supports_backward(op):
                    out = runner.run_backward(op, torch.float32, args.max_samples, noncontiguous=True)
                    record["noncontiguous_backward"] = _summary(out)
            try:
                torch.tpu.synchronize()
            except Exception as error:  # noqa: BLE001
                record["sync_error"] = str(error).splitlines()[0][:200]
        record["seconds"] = runner.elapsed(start)
        worker_pool.answer(record)


def _name(dtype):
    return str(dtype).replace("torch.", "")


def _summary(outcome):
    return {"total": outcome.total, "passed": outcome.passed, "skipped": outcome.skipped,
            "failures": sorted(set(outcome.failures))[:3], "fallbacks": outcome.fallbacks}


def _dtype_cell(record):
    return " ".join(d for d, s in record["forward"].items() if s["total"] and
                    s["passed"] == s["total"]) or "-"


def _cause(record):
    if record.get("crash"):
        return record["crash"]
    for d, s in record["forward"].items():
        if s["failures"]:
            return f"{d}: {s['failures'][0]}"
    back = record.get("backward")
    if back and back["failures"]:
        return "backward: " + back["failures"][0]
    for d, s in record.get("backward_by_dtype", {}).items():
        if s["failures"]:
            return f"backward {d}: {s['failures'][0]}"
    for check, label in _SIDE_CHECKS.items():
        if (record.get(check) or {}).get("failures"):
            return f"{label}: {record[check]['failures'][0]}"
    return ""


# The float32 checks reported beside the plain ones: record field -> label.
_SIDE_CHECKS = {"out": "out=", "noncontiguous": "non-contiguous",
                  "noncontiguous_backward": "non-contiguous backward"}


def _checked_cell(summary):
    """A table cell for one check: n/a where nothing ran, pass, or passed/total samples."""
    if not summary or not summary["total"]:
        return "n/a"
    return "pass" if _passes(summary) else f"{summary['passed']}/{summary['total']}"


def _passes(summary):
    return bool(summary and summary["total"] and summary["passed"] == summary["total"])


def _classify(record):
    f32 = record["forward"].get("float32")
    record["pass"] = _passes(f32)
    record["native"] = record["pass"] and not f32["fallbacks"]
    back = record.get("backward")
    record["backward_pass"] = _passes(back)
    record["backward_native"] = record["backward_pass"] and not back["fallbacks"]


def _markdown(records, excluded, args, totals):
    lines = [f"# tpu op coverage ({args.mode})", "",
             "Generated by `python -m torch_tpu.tools.op_coverage`. `native`: float32 samples ran "
             "no op through the CPU fallback; `fallback` lists the ATen ops that did.", "",
             "```json", json.dumps(totals), "```", "",
             "| op | dtypes passing | backward | out= | non-contiguous | native or fallback | failure cause |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in records:
        f32 = r["forward"].get("float32") or {"fallbacks": {}}
        back_cell = _checked_cell(r.get("backward"))
        for d, s in r.get("backward_by_dtype", {}).items():
            if s["total"]:
                back_cell += f"; {d} " + _checked_cell(s)
        noncontiguous_cell = _checked_cell(r.get("noncontiguous"))
        if (r.get("noncontiguous_backward") or {}).get("total"):
            noncontiguous_cell += "; backward " + _checked_cell(r["noncontiguous_backward"])
        if r["native"]:
            where = "native"
        elif f32["fallbacks"]:
            where = "fallback: " + ", ".join(sorted(f32["fallbacks"]))
        else:
            where = "-"
        cause = _cause(r).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['op']} | {_dtype_cell(r)} | {back_cell} | {_checked_cell(r.get('out'))} | "
                     f"{noncontiguous_cell} | {where} | {cause} |")
    lines += ["", "## Excluded OpInfos", ""]
    lines += [f"- {k}: {v}" for k, v in sorted(excluded.items())]
    return "\n".join(lines) + "\n"


def _totals(records):
    from torch_tpu.tools.opinfo_runner import is_core

    core = [r for r in records if is_core(r["op"])]
    families = {}
    for family in ("linalg", "fft", "special"):
        members = [r for r in records if r["op"].startswith(family + ".")]
        families[family] = {"total": len(members), "pass": sum(r["pass"] for r in members),
                            "native": sum(r["native"] for r in members)}
    fwd = [s for r in records for s in r["forward"].values()]
    backs = [r["backward"] for r in records if r.get("backward") and r["backward"]["total"]]
    return {
        "ops_total": len(records),
        "ops_pass": sum(r["pass"] for r in records),
        "ops_native": sum(r["native"] for r in records),
        "core_total": len(core),
        "core_pass": sum(r["pass"] for r in core),
        "core_native": sum(r["native"] for r in core),
        "samples_total": sum(s["total"] for s in fwd),
        "samples_pass": sum(s["passed"] for s in fwd),
        "backward_total": len(backs),
        "backward_pass": sum(r["backward_pass"] for r in records),
        "backward_native": sum(r["backward_native"] for r in records),
        "backward_samples_total": sum(b["total"] for b in backs),
        "backward_samples_pass": sum(b["passed"] for b in backs),
        "backward_by_dtype": _backward_by_dtype(records),
        **{check: _check_totals(r.get(check) for r in records) for check in _SIDE_CHECKS},
        "families": families,
    }


def _check_totals(summaries):
    """ops / pass / samples_total / samples_pass over the summaries of one check that ran."""
    totals = {"ops": 0, "pass": 0, "samples_total": 0, "samples_pass": 0}
    for s in summaries:
        if s and s["total"]:
            totals["ops"] += 1
            totals["pass"] += _passes(s)
            totals["samples_total"] += s["total"]
            totals["samples_pass"] += s["passed"]
    return totals


def _backward_by_dtype(records):
    dtypes = sorted({d for r in records for d in r.get("backward_by_dtype", {})})
    totals = {d: _check_totals(r.get("backward_by_dtype", {}).get(d) for r in records) for d in dtypes}
    return {d: t for d, t in totals.items() if t["ops"]}


def _write(args, ordered, excluded, extra):
    totals = _totals(ordered)
    totals.update(extra)
    with open(os.path.join(args.out, "op_coverage.md"), "w") as f:
        f.write(_markdown(ordered, excluded, args, totals))
    with open(os.path.join(args.out, "op_coverage.json"), "w") as f:
        json.dump({"totals": totals, "ops": ordered, "excluded": excluded}, f, indent=1)
    print(f"wrote {os.path.join(args.out, 'op_coverage.md')}", file=sys.stderr)
    print(json.dumps(totals))


def _rerender(args):
    """Rewrites the report of an earlier sweep in --out from its JSON, without running anything."""
    with open(os.path.join(args.out, "op_coverage.json")) as f:
        saved = json.load(f)
    ordered = saved["ops"]
    for record in ordered:
        _classify(record)
    extra = {k: saved["totals"][k] for k in ("mode", "seconds") if k in saved["totals"]}
    args.mode = extra.get("mode", args.mode)
    _write(args, ordered, saved["excluded"], extra)


def _run(args):
    from torch_tpu.tools.opinfo_runner import load_ops, op_key

    ops, excluded = load_ops()
    keys = [op_key(op) for op in ops]
    if args.ops:
        wanted = args.ops.split(",")
        unknown = [w for w in wanted if w not in keys]
        if unknown:
            sys.exit(f"unknown OpInfo names: {', '.join(unknown)}")
        keys = [k for k in keys if k in wanted]
    print(f"excluded {len(excluded)} OpInfos:", file=sys.stderr)
    for k, v in sorted(excluded.items()):
        print(f"  {k}: {v}", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "op_coverage_workers.log"), "w")

    records = {}
    start = time.monotonic()

    def report(record):
        records[record["op"]] = record
        _classify(record)
        status = "native" if record["native"] else "pass" if record["pass"] else "FAIL"
        print(f"[{len(records)}/{len(keys)} {time.monotonic() - start:.0f}s] {record['op']}: {status} "
              f"({record['seconds']}s) {_cause(record)[:100]}", file=sys.stderr, flush=True)

    def crashed(key, reason, seconds):
        report({"op": key, "forward": {}, "backward": None, "crash": reason, "seconds": round(seconds, 1)})

    worker = [sys.executable, "-m", "torch_tpu.tools.op_coverage", "--worker", "--mode", args.mode,
              "--dtypes", args.dtypes]
    if args.max_samples is not None:
        worker += ["--max-samples", str(args.max_samples)]
    worker += [f"--no-{check}" for check in ("backward", "out", "noncontiguous")
               if getattr(args, f"no_{check}")]
    worker_pool.run(worker, keys, args.jobs, args.timeout, log, lambda key, record: report(record), crashed)

    ordered = [records[k] for k in keys if k in records]
    _write(args, ordered, excluded, {"mode": args.mode, "seconds": round(time.monotonic() - start, 1)})


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_tpu.tools.op_coverage",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="strict",
                        choices=["strict", "debug", "defer_and_fuse", "fused"])
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names (default: all)")
    parser.add_argument("--dtypes", default="float32,bfloat16,float16,int64,int32,int16,int8,uint8,bool",
                        help="forward dtypes, comma-separated (float32 decides pass / native)")
    parser.add_argument("--max-samples", type=int, default=None,
                        help="at most this many samples per op and dtype")
    parser.add_argument("--no-backward", action="store_true")
    parser.add_argument("--no-out", action="store_true", help="skip the out= check")
    parser.add_argument("--no-noncontiguous", action="store_true",
                        help="skip the non-contiguous samples")
    parser.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    # max_unpool2d and the 3-D pools compile one program per sample shape: minutes on 2 cores.
    # max_pool3d, forward in nine dtypes and backward in three, took over 900 s on 2 busy cores.
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per op")
    parser.add_argument("--out", default="op_coverage")
    parser.add_argument("--rerender", action="store_true",
                        help="rewrite the report in --out from its saved JSON; runs nothing")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if "float32" not in args.dtypes.split(","):
        parser.error("--dtypes must include float32")
    if args.worker:
        _worker(args)
    elif args.rerender:
        _rerender(args)
    else:
        _run(args)


if __name__ == "__main__":
    main()
