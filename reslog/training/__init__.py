"""What runs inside training: `reslog.init()`, the Run and its writer thread. Needs SQLAlchemy and
psutil (torch only for tensors it is given); never the tools, the viewer, pandas or Qt.

    start.py         init(): the store opened, the run row written or resumed, the Run started
    run.py           the Run: log() only appends to memory
    wandb_compat.py  what `import reslog as wandb` needs beyond log()'s fast path, owned by the Run
    config.py        run.config          summary.py   run.summary
    options.py       init()'s options    disabled.py  init(mode="disabled")
    values.py        what log() accepts  lenient.py   log()'s slow path: nothing raises
    writer.py        the writer thread: batches, rollups, heartbeat, stall watch (stall.py)
    store_file.py    a SQLite file deleted or replaced under a running writer
    lifecycle.py     process exit, signals, fork
    system.py        GPU and host telemetry    model_watch.py  run.watch(model)
    hostinfo.py      host, command line, git commit, rank    media.py  wandb's value classes
    artifacts.py     run.save, Artifact, log_artifact: files copied and hashed on a worker thread
"""
