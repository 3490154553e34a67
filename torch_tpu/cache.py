"""The compilation cache's directory from the command line.

    python -m torch_tpu.cache stats [--dir DIR] [--json]
    python -m torch_tpu.cache clear [--dir DIR]

DIR defaults to the directory this environment uses: TORCH_TPU_CACHE_DIR, else
TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT, else $XDG_CACHE_HOME/torch_tpu or ~/.cache/torch_tpu.
`clear` deletes only the cache's own entry files, so pointing it at a directory that holds other
files is safe. Statistics of a running process: torch_tpu.cache_stats().
"""
import argparse
import json
import sys

from . import _C


def default_directory():
    """The cache directory of this environment, or None when the disk cache is off."""
    return _C._cache_directory_from_environment()


def directory_stats(directory=None):
    """{"directory", "entries_on_disk", "bytes_on_disk"} of `directory` (default: this
    environment's)."""
    directory = directory or default_directory()
    entries, size = _C._cache_scan(directory) if directory else (0, 0)
    return {"directory": directory, "entries_on_disk": entries, "bytes_on_disk": size}


def clear(directory=None):
    """Deletes the cache's entries in `directory` (default: this environment's), and this
    process's in-memory programs when it is the directory this process uses. Returns how many
    entries were deleted."""
    own = default_directory()
    directory = directory or own
    if not directory:
        return 0
    if directory == own:
        _C._clear_program_cache()
    return _C._cache_clear_directory(directory)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_tpu.cache",
                                     description="Inspect or empty torch_tpu's compilation cache directory.")
    parser.add_argument("command", choices=["stats", "clear"])
    parser.add_argument("--dir", help="the cache directory (default: from the environment)")
    parser.add_argument("--json", action="store_true", help="stats as one JSON object")
    args = parser.parse_args(argv)
    directory = args.dir or default_directory()
    if not directory:
        print("the disk cache is off (TORCH_TPU_CACHE_DIR is set to the empty string)")
        return 0
    if args.command == "clear":
        print(f"deleted {clear(directory)} entries from {directory}")
        return 0
    stats = directory_stats(directory)
    if args.json:
        print(json.dumps(stats))
    else:
        print(f"directory: {stats['directory']}")
        print(f"entries:   {stats['entries_on_disk']}")
        print(f"bytes:     {stats['bytes_on_disk']} ({stats['bytes_on_disk'] / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
