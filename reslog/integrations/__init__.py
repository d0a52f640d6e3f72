"""Training frameworks logging into reslog, each behind an optional extra:

    from reslog.integrations.huggingface import ReslogCallback   # pip install 'reslog[huggingface]'
    from reslog.integrations.lightning import ReslogLogger       # pip install 'reslog[lightning]'
    from reslog.integrations.accelerate import ReslogTracker     # pip install 'reslog[accelerate]'

All log from rank 0 (the main process) only. docs/integrations.md has the one-line usage of each.
"""
