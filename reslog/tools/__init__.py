"""The `reslog` command and what it runs, outside training: listing, comparing and exporting runs,
watching a store, checking and upgrading it, importing other trackers' runs.

    cli.py          the `reslog` console script
    export.py       points (CSV, Parquet) and the comparison table (also resplot's exports)
    watch.py        `reslog watch`: each thing about a store's runs worth a human's attention
    maintenance.py  `reslog check` and `reslog upgrade`
    importers/      `reslog import tensorboard|wandb|csv`
"""
