"""The read-only agent resplot runs next to a store: on a remote host over one SSH channel, or
as a local subprocess. Standard library only, Python 3.8 syntax: it is shipped to hosts as one
zipapp (bundle.py) holding this package and the stdlib-only parts of `schema` it reads with.

    wire.py    frames, errors, the binary columns of a reply, every section layout and request
               bound (also the client's: one codec)
    store.py   one SQLite store opened read-only: runs, keys, events, live points, series rows,
               tiles and raw step windows, each read in one read transaction
    serve.py   the request loop: one reply frame per request, errors as error frames
    bundle.py  the zipapp, built from these files, and the launcher that runs it from memory

docs/protocol.md is the protocol.
"""
