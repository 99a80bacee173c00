"""One process of a training run launched by ``torchrun`` (several GPUs on one machine).

When a training run's launch settings ask for ``nproc_per_node > 1`` (or ``launcher="torchrun"``)
the worker that holds the task does not train in its own process: it starts ::

    python -m torch.distributed.run --standalone --nproc_per_node N -m workers.train_entry \\
        --snapshot DIR --snapshot-sha HEX --model KIND --config FILE --out-dir DIR \\
        [--eval-snapshot DIR --eval-snapshot-sha HEX] [--progress FILE] [--stop-file FILE]

(``python -m torch.distributed.run`` is what the ``torchrun`` script runs, taken from the worker's
own interpreter so the same environment is used; ``--standalone`` picks a free local rendezvous
port, so several runs can share a machine). :func:`command` builds exactly this line.

Each of the ``N`` processes loads the snapshot folder (checked against ``--snapshot-sha``: the
hash the platform sealed), reads the ``models.training.trainer.TrainConfig`` JSON file and calls
``models.training.trainer.train`` into ``--out-dir``; the trainer reads ``WORLD_SIZE``, ``RANK`` and
``LOCAL_RANK`` from ``torchrun``, puts rank ``r`` on ``cuda:r`` (NCCL; gloo on CPUs), splits each
batch over the ranks, averages gradients and checkpoints from rank 0, and resumes from the
checkpoint in ``--out-dir`` like a one-process run. Rank 0 appends each step's record as a JSON
line to ``--progress`` (the worker tails it into ``TrainingStep`` rows and the Job's progress),
and with ``--checkpoint-links``, after each checkpoint, a hard link to it
(``checkpoint-<step>.link``, which later checkpoints do not overwrite) with the line
``{"checkpoint_step", "checkpoint_file"}``: the worker stores that file (``workers.artefacts``) and
removes the link;
every rank stops at the next step once ``--stop-file`` exists (the worker creates it when the run
is cancelled), after a checkpoint. The exit status is 0 when training ended (finished or
stopped); the summary is ``<out-dir>/result.json``.

Every process asks the kernel to kill it when its parent dies (Linux ``PR_SET_PDEATHSIG``), so
a worker killed with SIGKILL leaves no trainer behind to race the re-delivered task on the same
checkpoint folder. This module imports no Django: it runs wherever ``models/`` does.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
from pathlib import Path

from models.training.distributed import close_process_group
from models.training.snapshot import RelationSnapshotData
from models.training.trainer import train

PR_SET_PDEATHSIG = 1                             # linux/prctl.h


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent exits (Linux; elsewhere a
    no-op). Usable as ``subprocess.Popen(preexec_fn=...)``."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return
    libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def command(*, nproc_per_node: int, snapshot_dir: str, snapshot_sha: str, model_kind: str, config_file: str,
            out_dir: str, eval_snapshot_dir: str | None = None, eval_snapshot_sha: str | None = None,
            progress_file: str | None = None, stop_file: str | None = None, checkpoint_links: bool = False,
            python: str | None = None) -> list[str]:
    """The ``torchrun`` command line of one training attempt (see the module docstring)."""
    if not isinstance(nproc_per_node, int) or nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be a positive integer, got {nproc_per_node!r}")
    if (eval_snapshot_dir is None) != (eval_snapshot_sha is None):
        raise ValueError("eval_snapshot_dir and eval_snapshot_sha go together")
    for name, value in (("snapshot_dir", snapshot_dir), ("snapshot_sha", snapshot_sha), ("model_kind", model_kind),
                        ("config_file", config_file), ("out_dir", out_dir)):
        if not value:
            raise ValueError(f"{name} is required")
    cmd = [python or sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node", str(nproc_per_node), "-m", "workers.train_entry",
           "--snapshot", str(snapshot_dir), "--snapshot-sha", snapshot_sha, "--model", model_kind,
           "--config", str(config_file), "--out-dir", str(out_dir)]
    if eval_snapshot_dir is not None:
        cmd += ["--eval-snapshot", str(eval_snapshot_dir), "--eval-snapshot-sha", eval_snapshot_sha]
    if progress_file:
        cmd += ["--progress", str(progress_file)]
    if stop_file:
        cmd += ["--stop-file", str(stop_file)]
    if checkpoint_links:
        if not progress_file:
            raise ValueError("checkpoint_links announce each link in the progress file: give progress_file")
        cmd += ["--checkpoint-links"]
    return cmd


def _load(folder: str, sha: str):
    data = RelationSnapshotData.load(folder)
    if data.content_sha256() != sha:
        raise SystemExit(f"snapshot at {folder} does not have the sealed hash {sha[:12]}...")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.train_entry", description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", required=True, help="folder of the training snapshot")
    parser.add_argument("--snapshot-sha", required=True, help="its sealed content hash")
    parser.add_argument("--model", required=True, help="model kind (models.training.trainer.MODEL_KINDS)")
    parser.add_argument("--config", required=True, help="JSON file of the TrainConfig")
    parser.add_argument("--out-dir", required=True, help="checkpoint folder (resumed from when it has one)")
    parser.add_argument("--eval-snapshot", help="folder of the snapshot evaluated at the end")
    parser.add_argument("--eval-snapshot-sha", help="its sealed content hash")
    parser.add_argument("--progress", help="rank 0 appends each step's record here as a JSON line")
    parser.add_argument("--stop-file", help="stop (after a checkpoint) once this file exists")
    parser.add_argument("--checkpoint-links", action="store_true",
                        help="hard-link each checkpoint and announce it in --progress (for the worker to store)")
    args = parser.parse_args(argv)
    die_with_parent()


    snapshot = _load(args.snapshot, args.snapshot_sha)
    eval_snapshot = _load(args.eval_snapshot, args.eval_snapshot_sha) if args.eval_snapshot else None
    config = json.loads(Path(args.config).read_text())
    progress = open(args.progress, "a") if args.progress else None

    def on_step(record: dict) -> None:
        if progress is not None:
            progress.write(json.dumps(record) + "\n")
            progress.flush()

    def on_checkpoint(path: Path, step: int) -> None:
        if progress is None or not args.checkpoint_links:
            return
        link = path.with_name(f"checkpoint-{step:08d}.link")
        link.unlink(missing_ok=True)
        os.link(path, link)
        on_step({"checkpoint_step": step, "checkpoint_file": link.name})

    stop_file = Path(args.stop_file) if args.stop_file else None
    finished = False
    try:
        result = train(snapshot, args.model, config, args.out_dir, eval_snapshot=eval_snapshot, on_step=on_step,
                       should_stop=(lambda: stop_file.exists()) if stop_file else None, on_checkpoint=on_checkpoint)
        finished = True
    finally:
        if progress is not None:
            progress.close()
        close_process_group(finished=finished)
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"training {result['status']} at step {result['step']}/{result['steps']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
