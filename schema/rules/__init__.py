"""The rules reslog and resplot share over what a store holds: alert kinds and the GPU key
parse, throttle reasons, a job's ranks and phases, stragglers, hangs, run comparison.

Written once here so that `reslog watch`/`show`, the viewer and the exports cannot disagree.
They read the store's records (schema/store/); the store never imports them.
"""
