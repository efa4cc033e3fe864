"""gpucomp: bzip2 (and rle) compression served by gpucompd, shaped like bz2.

compress, decompress, open, BZ2File, BZ2Compressor and BZ2Decompressor take
the arguments of their namesakes in Python's bz2 and raise the same
exceptions; compress and decompress also take codec="rle". Work goes to the
gpucompd daemon (a GPU when it has one) and, when no daemon answers, runs in
this process on the same CPU engine (libgpucomp-client's gpucomp_open).
last_backend() says which ran the calling thread's last request; stats()
returns the daemon's counters. A failure of the service rather than the data
(stats() with no daemon) raises ServiceError, an OSError whose errno is the
library's GPUCOMP_E_* code.

Differences from bz2 (docs/DECISIONS.md, "Python module"): the engine works
on whole streams, so BZ2Decompressor returns a stream's output once the whole
stream has arrived, and BZ2Compressor returns output when flushed or when
its buffered input reaches STREAM_INPUT bytes, where it ends one stream and
starts the next (concatenated streams, as pbzip2 and lbzip2 write them).
"""

import builtins
import io
import os
import threading

import _compression

from ._gpucomp import ServiceError, _compress, _decompress, _find_stream_end, library_version, stats

__all__ = ["BZ2File", "BZ2Compressor", "BZ2Decompressor", "open", "compress", "decompress",
           "last_backend", "stats", "library_version", "ServiceError", "STREAM_INPUT"]

# Input a BZ2Compressor buffers before it compresses it as one stream: large
# enough for a GPU to gain, small enough to bound the memory of a writer.
STREAM_INPUT = 64 << 20

_local = threading.local()


def last_backend():
    """Which engine ran this thread's last request: "gpu", "cpu" (the daemon's
    CPU workers), "cpu (in process)" (no daemon), or None before any."""
    return getattr(_local, "backend", None)


def _run(fn, *args):
    out, backend = fn(*args)
    _local.backend = backend
    return out


def compress(data, compresslevel=9, codec="bzip2"):
    """Compress data in one shot (bzip2 at compresslevel 1..9, or codec="rle")."""
    return _run(_compress, data, compresslevel, codec)


def decompress(data, codec="bzip2"):
    """Decompress data in one shot; bzip2 data may hold several concatenated streams."""
    if codec != "bzip2":
        return _run(_decompress, data, codec)
    data = memoryview(data).cast("B")
    if not data:
        return b""
    try:
        return _run(_decompress, data)
    except ServiceError:
        raise  # the service failed, not the data
    except (OSError, ValueError):
        pass
    # Stream by stream, for bz2's verdicts: garbage after a stream is ignored,
    # a stream that ends early is an error.
    results = []
    while data:
        d = BZ2Decompressor()
        try:
            res = d.decompress(data)
        except OSError:
            if results:
                break
            raise
        results.append(res)
        if not d.eof:
            raise ValueError("Compressed data ended before the end-of-stream marker was reached")
        data = memoryview(d.unused_data)
    return b"".join(results)


def _check_level(compresslevel):
    if not isinstance(compresslevel, int):
        raise TypeError("an integer is required")
    if not 1 <= compresslevel <= 9:
        raise ValueError("compresslevel must be between 1 and 9")


class BZ2Compressor:
    """Incremental compression, as bz2.BZ2Compressor (see the module's notes)."""

    def __init__(self, compresslevel=9, /):
        _check_level(compresslevel)
        self._level = compresslevel
        self._parts = []
        self._size = 0
        self._streams = 0
        self._flushed = False
        self._lock = threading.Lock()

    def __reduce__(self):
        raise TypeError(f"cannot pickle {type(self).__name__!r} object")

    def _stream(self):
        data = b"".join(self._parts)
        self._parts, self._size = [], 0
        self._streams += 1
        return compress(data, self._level)

    def compress(self, data, /):
        with self._lock:
            if self._flushed:
                raise ValueError("Compressor has been flushed")
            chunk = bytes(memoryview(data).cast("B"))
            if not chunk:
                return b""
            self._parts.append(chunk)
            self._size += len(chunk)
            return self._stream() if self._size >= STREAM_INPUT else b""

    def flush(self):
        with self._lock:
            if self._flushed:
                raise ValueError("Repeated call to flush()")
            self._flushed = True
            if self._size == 0 and self._streams:
                return b""
            return self._stream()


_HEADER = b"BZh"
_BLOCK_MAGIC = b"\x31\x41\x59\x26\x53\x59"
_EOS_MAGIC = b"\x17\x72\x45\x38\x50\x90"


class BZ2Decompressor:
    """Incremental decompression of one bzip2 stream, as bz2.BZ2Decompressor."""

    def __init__(self):
        self._in = bytearray()
        self._scan = 0  # bit offset from which to look for the stream's end
        self._out = b""
        self._pos = 0
        self._decoded = False
        self._eof = False
        self._unused = b""
        self._lock = threading.Lock()

    def __reduce__(self):
        raise TypeError(f"cannot pickle {type(self).__name__!r} object")

    @property
    def eof(self):
        """True once the end of the stream has been reached and its output returned."""
        return self._eof

    @property
    def unused_data(self):
        """Data found after the end of the stream."""
        return self._unused if self._eof else b""

    @property
    def needs_input(self):
        """False while decompress() can return more output without new input."""
        return not self._decoded

    def _check_header(self):
        head = bytes(self._in[:10])
        ok = head[:3] == _HEADER[:len(head[:3])]
        if len(head) > 3:
            ok = ok and 0x31 <= head[3] <= 0x39
        if len(head) > 4:
            tail = head[4:]
            ok = ok and (_BLOCK_MAGIC.startswith(tail) or _EOS_MAGIC.startswith(tail))
        if not ok:
            raise OSError("Invalid data stream")

    def _try_decode(self):
        self._check_header()
        while True:
            bit, end = _find_stream_end(self._in, self._scan)
            if bit < 0:
                # the marker may straddle what arrives next: look again from here
                self._scan = max(self._scan, (len(self._in) - 6) * 8)
                return
            if end > len(self._in):
                self._scan = bit
                return
            try:
                out = _run(_decompress, memoryview(self._in)[:end])
            except ValueError:
                # those 48 bits were block data, not the stream's end
                self._scan = bit + 1
                continue
            self._out, self._pos, self._decoded = out, 0, True
            self._unused = bytes(self._in[end:])
            self._in = bytearray()
            return

    def decompress(self, data, max_length=-1):
        """Decompress data; return at most max_length bytes (all if negative)."""
        with self._lock:
            if self._eof:
                raise EOFError("End of stream already reached")
            data = memoryview(data).cast("B")
            if self._decoded:
                self._unused += data
            elif data or not self._in:
                self._in += data
                self._try_decode()
            stop = len(self._out) if max_length < 0 else min(len(self._out), self._pos + max_length)
            out = self._out[self._pos:stop]
            self._pos = stop
            if self._decoded and self._pos == len(self._out):
                self._eof = True
                self._out = b""
            return out


_MODE_CLOSED = 0
_MODE_READ = 1
_MODE_WRITE = 3


class BZ2File(_compression.BaseStream):
    """A file object giving access to a bzip2-compressed file, as bz2.BZ2File."""

    def __init__(self, filename, mode="r", *, compresslevel=9):
        self._fp = None
        self._closefp = False
        self._mode = _MODE_CLOSED
        if not (1 <= compresslevel <= 9):
            raise ValueError("compresslevel must be between 1 and 9")
        if mode in ("", "r", "rb"):
            mode, mode_code = "rb", _MODE_READ
        elif mode in ("w", "wb"):
            mode, mode_code = "wb", _MODE_WRITE
            self._compressor = BZ2Compressor(compresslevel)
        elif mode in ("x", "xb"):
            mode, mode_code = "xb", _MODE_WRITE
            self._compressor = BZ2Compressor(compresslevel)
        elif mode in ("a", "ab"):
            mode, mode_code = "ab", _MODE_WRITE
            self._compressor = BZ2Compressor(compresslevel)
        else:
            raise ValueError("Invalid mode: %r" % (mode,))
        if isinstance(filename, (str, bytes, os.PathLike)):
            self._fp = builtins.open(filename, mode)
            self._closefp = True
            self._mode = mode_code
        elif hasattr(filename, "read") or hasattr(filename, "write"):
            self._fp = filename
            self._mode = mode_code
        else:
            raise TypeError("filename must be a str, bytes, file or PathLike object")
        if self._mode == _MODE_READ:
            raw = _compression.DecompressReader(self._fp, BZ2Decompressor, trailing_error=OSError)
            self._buffer = io.BufferedReader(raw)
        else:
            self._pos = 0

    def close(self):
        """Flush and close the file (its underlying file too if this opened it)."""
        if self._mode == _MODE_CLOSED:
            return
        try:
            if self._mode == _MODE_READ:
                self._buffer.close()
            elif self._mode == _MODE_WRITE:
                self._fp.write(self._compressor.flush())
                self._compressor = None
        finally:
            try:
                if self._closefp:
                    self._fp.close()
            finally:
                self._fp = None
                self._closefp = False
                self._mode = _MODE_CLOSED
                self._buffer = None

    @property
    def closed(self):
        return self._mode == _MODE_CLOSED

    def fileno(self):
        self._check_not_closed()
        return self._fp.fileno()

    def seekable(self):
        return self.readable() and self._buffer.seekable()

    def readable(self):
        self._check_not_closed()
        return self._mode == _MODE_READ

    def writable(self):
        self._check_not_closed()
        return self._mode == _MODE_WRITE

    def peek(self, n=0):
        self._check_can_read()
        return self._buffer.peek(n)

    def read(self, size=-1):
        self._check_can_read()
        return self._buffer.read(size)

    def read1(self, size=-1):
        self._check_can_read()
        if size < 0:
            size = io.DEFAULT_BUFFER_SIZE
        return self._buffer.read1(size)

    def readinto(self, b):
        self._check_can_read()
        return self._buffer.readinto(b)

    def readline(self, size=-1):
        if not isinstance(size, int):
            if not hasattr(size, "__index__"):
                raise TypeError("Integer argument expected")
            size = size.__index__()
        self._check_can_read()
        return self._buffer.readline(size)

    def readlines(self, size=-1):
        if not isinstance(size, int):
            if not hasattr(size, "__index__"):
                raise TypeError("Integer argument expected")
            size = size.__index__()
        self._check_can_read()
        return self._buffer.readlines(size)

    def write(self, data):
        """Write bytes-like data; returns the number of uncompressed bytes."""
        self._check_can_write()
        if isinstance(data, (bytes, bytearray)):
            length = len(data)
        else:
            data = memoryview(data)
            length = data.nbytes
        self._fp.write(self._compressor.compress(data))
        self._pos += length
        return length

    def writelines(self, seq):
        return _compression.BaseStream.writelines(self, seq)

    def seek(self, offset, whence=io.SEEK_SET):
        """Seek in the uncompressed data (emulated: may be slow, as in bz2)."""
        self._check_can_seek()
        return self._buffer.seek(offset, whence)

    def tell(self):
        """Position in the uncompressed data."""
        self._check_not_closed()
        if self._mode == _MODE_READ:
            return self._buffer.tell()
        return self._pos


def open(filename, mode="rb", compresslevel=9, encoding=None, errors=None, newline=None):
    """Open a bzip2-compressed file in binary or text mode, as bz2.open."""
    if "t" in mode:
        if "b" in mode:
            raise ValueError("Invalid mode: %r" % (mode,))
    else:
        if encoding is not None:
            raise ValueError("Argument 'encoding' not supported in binary mode")
        if errors is not None:
            raise ValueError("Argument 'errors' not supported in binary mode")
        if newline is not None:
            raise ValueError("Argument 'newline' not supported in binary mode")
    binary_file = BZ2File(filename, mode.replace("t", ""), compresslevel=compresslevel)
    if "t" in mode:
        encoding = io.text_encoding(encoding)
        return io.TextIOWrapper(binary_file, encoding, errors, newline)
    return binary_file
