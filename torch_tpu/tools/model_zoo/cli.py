"""The command line, `python -m torch_tpu.tools.model_zoo`: it picks the architectures (--quick,
--arch, or the whole selection interleaved by family; --shard i/n takes every n-th of them) and
the modes, then runs them with resume (--fresh, --rerun), prints the selection (--list), or
rewrites the report from saved results (--report, which --merge feeds from several shards'
directories); the totals are the last line of stdout."""
import argparse
import json
import os
import sys

from torch_tpu.tools.model_zoo.compare import MODES
from torch_tpu.tools.model_zoo.report import _ordered, totals, write_results
from torch_tpu.tools.model_zoo.libraries import entries as library_entries
from torch_tpu.tools.model_zoo.selection import QUICK, _family_of, extra_tasks, select, tiers
from torch_tpu.tools.model_zoo.sweep import _quiet_transformers, _worker, run


def shard_of(archs, shard):
    """The i-th of n interleaved slices of `archs` ("i/n", 1-based): shards of an interleaved
    selection each get every family, so their run times are alike."""
    try:
        index, count = (int(part) for part in shard.split("/"))
    except ValueError:
        raise ValueError(f"--shard takes i/n (for example 2/4), not {shard!r}") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard {shard}: i must be between 1 and n")
    return archs[index - 1::count]


def load_records(directories):
    """The records saved in each directory's model_zoo.json (later directories winning), and the
    last one's meta (the command and modes it was run with)."""
    records, meta = {}, {}
    for directory in directories:
        with open(os.path.join(directory, "model_zoo.json")) as f:
            saved = json.load(f)
        records.update((r["arch"], r) for r in saved["architectures"])
        meta = saved.get("meta", {})
    return records, meta


def main(argv=None):
    # The package's docstring, which describes the whole tool, is the help's description.
    summary = sys.modules[__package__].__doc__.split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m torch_tpu.tools.model_zoo",
                                     description=summary)
    parser.add_argument("--quick", action="store_true",
                        help=f"the fixed CI sample of {len(QUICK)} architectures")
    parser.add_argument("--arch", default="", help="comma-separated model types")
    parser.add_argument("--tier", type=int, choices=(1, 2), default=None,
                        help="1: only the widely used model types (and their extra task entries); "
                             "2: only the rest (the other modelling modules, diffusers)")
    parser.add_argument("--shard", default="",
                        help="i/n: run only the i-th of n interleaved slices of the selection (one per machine)")
    parser.add_argument("--merge", default="",
                        help="with --report: comma-separated result directories of the shards, "
                             "combined into --out")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", default="model_zoo_results")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per architecture")
    parser.add_argument("--fresh", action="store_true", help="ignore earlier results in --out")
    parser.add_argument("--rerun", default="",
                        help="with resume, also run again: na (not applicable), failed, or both")
    parser.add_argument("--list", action="store_true", help="print the selection and exit")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: rewrite the table and totals from the results in --out")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker()
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {unknown}; use {','.join(MODES)}")
    _quiet_transformers()
    selection = select()
    if args.arch:
        archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    elif args.quick:
        archs = list(QUICK)
    else:
        first, rest = tiers(selection)
        archs = {1: first, 2: rest}.get(args.tier, first + rest)
    if args.shard:
        try:
            archs = shard_of(archs, args.shard)
        except ValueError as e:
            parser.error(str(e))
    if args.merge and not args.report:
        parser.error("--merge only goes with --report")
    if args.list:
        listed = selection + library_entries() + extra_tasks([t for t, _, _ in selection])
        tasks = {t: (task, cls) for t, task, cls in listed}
        tier_one = set(tiers(selection)[0])
        for model_type in archs:
            task, cls = tasks.get(model_type, ("-", "-"))
            print(f"{model_type}\t{task}\t{cls}\ttier {1 if model_type in tier_one else 2}")
        return
    command = "python -m torch_tpu.tools.model_zoo" + (" --quick" if args.quick else "") + \
        (f" --arch {args.arch}" if args.arch else "") + (f" --tier {args.tier}" if args.tier else "") + \
        (f" --shard {args.shard}" if args.shard else "")
    if args.report:
        sources = [d.strip() for d in args.merge.split(",") if d.strip()] or [args.out]
        saved, saved_meta = load_records(sources)
        if args.merge:
            saved_meta = {"command": f"{command} --report --merge {args.merge}", "modes": modes}
        records = _ordered(saved, archs)
        records = [r for r in records if r["arch"] in archs]
        for r in records:
            if r.get("family", "unknown") == "unknown":
                r["family"] = _family_of(r["arch"])
        write_results(args.out, records, modes, saved_meta)
        final = totals(records, modes)
        print(json.dumps({m: final[m] for m in modes} |
                         {k: final[k] for k in ("architectures", "architectures_attempted", "extra_task_entries",
                                "not_applicable", "libraries", "not_applicable_by_library")}))
        return final
    rerun = {r.strip() for r in args.rerun.split(",") if r.strip()}
    if rerun - {"na", "failed"}:
        parser.error("--rerun takes na, failed or na,failed")
    records, t = run(archs, modes, args.out, args.jobs, args.timeout, not args.fresh,
                     command=command, rerun=rerun)
    print(f"wrote {os.path.join(args.out, 'model_zoo.md')}", file=sys.stderr)
    ran = [r for r in records if r["arch"] in archs]
    final = totals(ran, modes)
    print(json.dumps({m: final[m] for m in modes} |
                     {k: final[k] for k in ("architectures", "architectures_attempted", "extra_task_entries",
                                "not_applicable", "libraries", "not_applicable_by_library")}))
    return t
