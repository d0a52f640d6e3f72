"""The agent as one zipapp: this package and the stdlib-only parts of `schema` it reads with,
and the launcher that runs it from memory.

The archive never lands in a file. resplot starts `python -I -S -c BOOT` (on a host, through
`launcher()`, which finds an interpreter new enough) and sends the archive as the first bytes
on the agent's stdin, then the client's compiled code of it; BOOT checks both sha256s against
the hashes written into BOOT itself and imports the agent from those bytes (the compiled code
where the host's Python has the client's bytecode magic, else the source). So no file another
user could plant or swap (a shared /tmp, a home folder on NFS) is ever executed, and a host
needs no SFTP and no writable home.

The archive is built from the installed files in a fixed order with fixed timestamps, so its
bytes and hash change exactly when the agent's code does. The two package `__init__` files in
it are stubs: the real ones import SQLAlchemy and the logging library, which a GPU host need
not have.
"""

from __future__ import annotations

import base64
import hashlib
import io
import marshal
import shlex
import struct
import threading
import zipfile
import zlib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENT_FILES = (
    "__init__.py",
    "__main__.py",
    "serve.py",
    "store.py",
    "tile_read.py",
    "tile_workers.py",
    "wire.py",
)
# The schema modules the agent imports; each imports only the standard library and these.
# Named as imported (a move's rewrite of the module path finds them); their packages get stubs.
SCHEMA_MODULES = (
    "schema.store.buckets",
    "schema.store.chunk_codec",
    "schema.store.chunk_codec_numpy",
    "schema.store.chunk_columns",
    "schema.store.chunk_layout",
    "schema.store.chunk_read",
    "schema.store.columns",
    "schema.store.envelope",
    "schema.store.folding",
    "schema.store.folding_numpy",
    "schema.store.gc_pause",
    "schema.store.liveness",
    "schema.store.points_by_id",
    "schema.store.revision",
    "schema.store.rollup",
    "schema.store.series_rows",
    "schema.store.sqlite_file",
    "schema.store.status",
    "schema.store.user_files",
)
# Every package above them, parents first: each gets STUB as its __init__.
SCHEMA_PACKAGES = tuple(
    sorted({".".join(m.split(".")[:i]) for m in SCHEMA_MODULES for i in range(1, m.count(".") + 1)})
)
STUB = b'"""Part of the reslog agent archive (see reslog/agent/bundle.py)."""\n'
MAIN = b"import sys\nfrom reslog.agent.serve import main\nsys.exit(main())\n"
EPOCH = (2020, 1, 1, 0, 0, 0)


def _add(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=EPOCH)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


@cache
def archive() -> bytes:
    """The agent's zipapp (bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        _add(zf, "__main__.py", MAIN)
        _add(zf, "reslog/__init__.py", STUB)
        for name in AGENT_FILES:
            _add(zf, f"reslog/agent/{name}", (ROOT / "reslog" / "agent" / name).read_bytes())
        for package in SCHEMA_PACKAGES:
            _add(zf, package.replace(".", "/") + "/__init__.py", STUB)
        for module in SCHEMA_MODULES:
            path = module.replace(".", "/") + ".py"
            _add(zf, path, (ROOT / path).read_bytes())
    return buf.getvalue()


@cache
def archive_hash() -> str:
    """sha256 prefix of the archive: BOOT refuses any other bytes."""
    return hashlib.sha256(archive()).hexdigest()[:16]


# -- running it from memory ---------------------------------------------------------------------

MIN_PYTHON = (3, 8)
NO_PYTHON = 127  # the launcher's exit status when no interpreter fits (the shell's "not found")
BOOT_PREFIX = struct.Struct("<Q")  # the archive's length, before its bytes on stdin
MAX_ARCHIVE = 16 << 20
# Python 3.8 syntax, stdlib only; {hash} and {max} are filled in by boot_code(). The importer
# serves the archive's modules from a dict; tracebacks get their source through get_source.
# The finder is a plain class: importlib.abc (with importlib.resources, tempfile and typing
# behind it on 3.11) cost ~40 ms of every boot on a loaded host. After the archive comes the
# client's compiled code of it (code_blob()), checked like the archive and used where this
# interpreter's bytecode magic is the client's, so that the host compiles nothing; elsewhere
# (another Python version) each module is compiled from the archive's source as before.
_BOOT = """\
import hashlib, importlib.machinery, io, sys, zipfile
r = sys.stdin.buffer
def part():
    n = int.from_bytes(r.read(8), "little")
    return r.read(n) if 0 < n <= {max} else b""
def refuse(d):
    sys.stderr.write("reslog agent: stdin did not hold agent {hash} (%d bytes)\\n" % len(d))
    sys.exit(3)
d = part()
if hashlib.sha256(d).hexdigest()[:16] != "{hash}":
    refuse(d)
c = part()
if hashlib.sha256(c).hexdigest()[:16] != "{code}":
    refuse(d)
C = {{}}
from importlib.util import MAGIC_NUMBER
if c[:len(MAGIC_NUMBER)] == MAGIC_NUMBER:
    import marshal, zlib
    C = marshal.loads(zlib.decompress(c[len(MAGIC_NUMBER):]))
z = zipfile.ZipFile(io.BytesIO(d))
S = dict((i.filename, z.read(i)) for i in z.infolist())
P = "<reslog-agent {hash}>/"
class Finder:
    def find_spec(self, name, path=None, target=None):
        base = name.replace(".", "/")
        for f, pkg in ((base + "/__init__.py", True), (base + ".py", False)):
            if f in S:
                return importlib.machinery.ModuleSpec(name, self, origin=P + f, is_package=pkg)
        return None
    def create_module(self, spec):
        return None
    def _file(self, name):
        base = name.replace(".", "/")
        return base + "/__init__.py" if base + "/__init__.py" in S else base + ".py"
    def get_source(self, name):
        return S[self._file(name)].decode("utf-8")
    def is_package(self, name):
        return self._file(name).endswith("/__init__.py")
    def exec_module(self, module):
        f = self._file(module.__name__)
        module.__file__ = P + f
        code = C.get(f) or compile(S[f], module.__file__, "exec")
        exec(code, module.__dict__)
sys.meta_path.insert(0, Finder())
exec(C.get("__main__.py") or compile(S["__main__.py"], P + "__main__.py", "exec"),
     {{"__name__": "__main__"}})
"""
_code: bytes | None = None
_preparing = False
_code_lock = threading.Lock()


def code_blob() -> bytes:
    """This interpreter's bytecode magic, then every module of the archive compiled as BOOT
    would compile it (same file names, no -O), marshalled and deflated (~125 KB): what a host
    of the same Python version runs instead of compiling the ~190 KB of source (~70 ms at best,
    200 ms on a busy host, each boot). Made once a process, under a lock (its hash is in BOOT:
    two threads must never see two blobs); `prepare()` makes it early, beside the SSH login."""
    global _code
    with _code_lock:
        if _code is None:
            from importlib.util import MAGIC_NUMBER

            prefix = f"<reslog-agent {archive_hash()}>/"
            with zipfile.ZipFile(io.BytesIO(archive())) as zf:
                code = {
                    info.filename: compile(
                        zf.read(info),
                        prefix + info.filename,
                        "exec",
                        dont_inherit=True,
                        optimize=0,
                    )
                    for info in zf.infolist()
                }
            _code = MAGIC_NUMBER + zlib.compress(marshal.dumps(code), 9)
        return _code


def prepare() -> None:
    """Build the archive, its compiled code and BOOT on a thread now (once a process), so that
    the first agent started, after an SSH login's ~0.1 s of waiting on the network, finds them
    made."""
    global _preparing
    with _code_lock:
        if _preparing or _code is not None:
            return
        _preparing = True
    threading.Thread(target=boot_code, daemon=True, name="reslog-agent-bundle").start()


@cache
def boot_code() -> str:
    """The `python -I -S -c` program that reads the archive from stdin, checks it and runs it:
    _BOOT, on one line (base64) so that any login shell (csh, fish) passes it on unharmed."""
    code = hashlib.sha256(code_blob()).hexdigest()[:16]
    program = _BOOT.format(hash=archive_hash(), code=code, max=MAX_ARCHIVE).encode()
    # First, in syntax any Python (2 too) reads: too old says so, as the launcher would.
    need = ".".join(map(str, MIN_PYTHON))
    check = (
        f"import sys; sys.version_info >= {MIN_PYTHON} or (sys.stderr.write('reslog agent: "
        f"needs Python >= {need} on this host; found: %s (%s)\\n' % (sys.executable, "
        f"sys.version.split()[0])), sys.exit({NO_PYTHON}))"
    )
    return f"{check}; import base64; exec(base64.b64decode('{base64.b64encode(program).decode()}'))"


def boot_bytes() -> bytes:
    """What the client writes first on the agent's stdin: the archive and its compiled code,
    each after its length."""
    data, code = archive(), code_blob()
    return BOOT_PREFIX.pack(len(data)) + data + BOOT_PREFIX.pack(len(code)) + code


def local_argv(python: str) -> list[str]:
    """The agent as a local subprocess under `python` (one known to be new enough)."""
    return [python, "-I", "-S", "-c", boot_code()]


# Tried in order when the spec names no interpreter: the login PATH's, then versioned names,
# then where conda, pyenv and virtual environments in the home put theirs, then system places a
# login PATH may lack.
CANDIDATES = (
    "python3",
    *(f"python3.{minor}" for minor in range(14, MIN_PYTHON[1] - 1, -1)),
    "python",
    "~/miniconda3/bin/python3",
    "~/miniforge3/bin/python3",
    "~/mambaforge/bin/python3",
    "~/anaconda3/bin/python3",
    "~/.pyenv/shims/python3",
    "~/.local/bin/python3",
    "~/.venv/bin/python3",
    "~/venv/bin/python3",
    "/opt/conda/bin/python3",
    "/usr/local/bin/python3",
    "/usr/bin/python3",
)
# POSIX sh, without `!` (a csh login shell would see history there): $1 is BOOT, the rest the
# interpreters to try. A single (named) one runs BOOT at once, which checks its own version; of
# several, the first that exists and reports a version >= MIN_PYTHON (a Python 2 prints its
# version and fails the test) runs it. Otherwise what was found (or, for a single candidate,
# that it was not) is said on stderr, with the exit status NO_PYTHON.
_LAUNCH = (
    'b=$1; shift; n=$#; tried=""; '
    'for p in "$@"; do '
    'case $p in "~/"*) p=$HOME/${{p#"~/"}};; esac; '
    'if command -v "$p" >/dev/null 2>&1; then :; else '
    '[ "$n" = 1 ] && tried=" $p (not found)"; continue; fi; '
    '[ "$n" = 1 ] && exec "$p" -I -S -c "$b"; '  # a named one: BOOT itself checks its version
    'v=$("$p" -S -c "import sys; sys.stdout.write(\'%d.%d.%d\' % tuple(sys.version_info[:3])); '
    'sys.exit(sys.version_info[:2] < ({major}, {minor}))" 2>/dev/null) '
    '&& exec "$p" -I -S -c "$b"; '
    'tried="$tried $p (${{v:-no version}})"; done; '
    'echo "reslog agent: needs Python >= {major}.{minor} on this host; '
    'found:${{tried:- none}}" >&2; '
    "exit {code}"
)


def launcher(python: str | None = None, candidates: tuple[str, ...] = CANDIDATES) -> str:
    """A shell command that runs the agent from memory under the first interpreter that fits:
    `python` alone when given (a `#python=` of the spec; `~/` is the login's home), else the
    first of `candidates`. Run by the host's login shell; the archive follows on stdin
    (boot_bytes)."""
    script = _LAUNCH.format(major=MIN_PYTHON[0], minor=MIN_PYTHON[1], code=NO_PYTHON)
    tries = [python] if python else list(candidates)
    words = ["/bin/sh", "-c", script, "reslog-agent", boot_code(), *tries]
    return "exec " + " ".join(map(shlex.quote, words))
