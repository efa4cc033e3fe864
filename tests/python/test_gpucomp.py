"""Tests of the gpucomp Python module, modelled on the cases of CPython's
test_bz2 for the bz2-shaped half, plus rle, stats, the backend and the GIL.

Run by tests/check_python.sh, with no daemon and with one (GPUCOMP_SOCKET set,
GPUCOMP_EXPECT_BACKEND naming the backend every request must report).
"""
import bz2
import io
import os
import pickle
import random
import tempfile
import threading
import time
import unittest

import gpucomp

TEXT_LINES = [b"root:x:0:0:root:/root:/bin/bash\n", b"bin:x:1:1:bin:/bin:\n",
              b"daemon:x:2:2:daemon:/sbin:\n", b"nobody:x:65534:65534:nobody:/nonexistent:\n"] * 40
TEXT = b"".join(TEXT_LINES)
DATA = bz2.compress(TEXT)
EMPTY_DATA = b"BZh9\x17rE8P\x90\x00\x00\x00\x00"
BAD_DATA = b"this is not a valid bzip2 file"
EXPECT = os.environ.get("GPUCOMP_EXPECT_BACKEND")


def big_data(n=1 << 20):
    rnd = random.Random(7)
    return bytes(rnd.getrandbits(8) for _ in range(n // 8)) * 8


class BackendMixin:
    def tearDown(self):
        if EXPECT and gpucomp.last_backend() is not None:
            self.assertEqual(gpucomp.last_backend(), EXPECT)


class OneShotTest(BackendMixin, unittest.TestCase):
    def test_compress(self):
        data = gpucomp.compress(TEXT)
        self.assertEqual(bz2.decompress(data), TEXT)
        self.assertIn(gpucomp.last_backend(), ("cpu", "gpu", "cpu (in process)"))

    def test_compress_levels(self):
        for level in range(1, 10):
            self.assertEqual(gpucomp.compress(TEXT, level)[:4], b"BZh%d" % level)
            self.assertEqual(bz2.decompress(gpucomp.compress(TEXT, compresslevel=level)), TEXT)
        for bad in (0, 10, -1):
            with self.assertRaises(ValueError):
                gpucomp.compress(TEXT, bad)

    def test_compress_empty(self):
        self.assertEqual(bz2.decompress(gpucomp.compress(b"")), b"")

    def test_decompress(self):
        self.assertEqual(gpucomp.decompress(DATA), TEXT)
        self.assertEqual(gpucomp.decompress(bytearray(DATA)), TEXT)
        self.assertEqual(gpucomp.decompress(memoryview(DATA)), TEXT)

    def test_decompress_empty(self):
        self.assertEqual(gpucomp.decompress(b""), b"")
        self.assertEqual(gpucomp.decompress(EMPTY_DATA), b"")

    def test_decompress_multi_stream(self):
        self.assertEqual(gpucomp.decompress(DATA * 5), TEXT * 5)
        self.assertEqual(gpucomp.decompress(EMPTY_DATA * 3 + DATA), TEXT)

    def test_decompress_trailing_junk(self):
        self.assertEqual(gpucomp.decompress(DATA + BAD_DATA), TEXT)
        self.assertEqual(gpucomp.decompress(DATA * 3 + BAD_DATA), TEXT * 3)

    def test_decompress_incomplete(self):
        self.assertRaises(ValueError, gpucomp.decompress, DATA[:-10])
        self.assertRaises(ValueError, gpucomp.decompress, DATA[:6])

    def test_decompress_bad(self):
        with self.assertRaisesRegex(OSError, "Invalid data stream"):
            gpucomp.decompress(BAD_DATA)
        damaged = bytearray(DATA)
        damaged[len(damaged) // 2] ^= 0x55
        with self.assertRaises(OSError):
            gpucomp.decompress(bytes(damaged))

    def test_decompress_big(self):
        data = big_data()
        self.assertEqual(gpucomp.decompress(bz2.compress(data)), data)
        self.assertEqual(bz2.decompress(gpucomp.compress(data, 1)), data)

    def test_rle_round_trip(self):
        for data in (b"", b"a", b"a" * 100000, TEXT, big_data(1 << 18)):
            packed = gpucomp.compress(data, codec="rle")
            self.assertEqual(gpucomp.decompress(packed, codec="rle"), data)
        self.assertLess(len(gpucomp.compress(b"\0" * 100000, codec="rle")), 1000)

    def test_rle_bad(self):
        with self.assertRaises(OSError):
            gpucomp.decompress(BAD_DATA * 3, codec="rle")

    def test_unknown_codec(self):
        self.assertRaises(ValueError, gpucomp.compress, TEXT, codec="zstd")
        self.assertRaises(ValueError, gpucomp.decompress, DATA, codec="zstd")

    def test_bad_args(self):
        self.assertRaises(TypeError, gpucomp.compress)
        self.assertRaises(TypeError, gpucomp.compress, "text")
        self.assertRaises(TypeError, gpucomp.decompress, 123)


class CompressorTest(BackendMixin, unittest.TestCase):
    def test_compress(self):
        c = gpucomp.BZ2Compressor()
        data = c.compress(TEXT) + c.flush()
        self.assertEqual(bz2.decompress(data), TEXT)

    def test_compress_empty(self):
        c = gpucomp.BZ2Compressor()
        data = c.compress(b"") + c.flush()
        self.assertEqual(data, EMPTY_DATA)

    def test_compress_chunks(self):
        c = gpucomp.BZ2Compressor(3)
        data = b"".join(c.compress(TEXT[i:i + 10]) for i in range(0, len(TEXT), 10)) + c.flush()
        self.assertEqual(bz2.decompress(data), TEXT)
        self.assertEqual(data[:4], b"BZh3")

    def test_streams_bound_memory(self):
        saved = gpucomp.STREAM_INPUT
        gpucomp.STREAM_INPUT = 1000
        try:
            c = gpucomp.BZ2Compressor()
            data = b"".join(c.compress(TEXT[i:i + 300]) for i in range(0, len(TEXT), 300)) + c.flush()
        finally:
            gpucomp.STREAM_INPUT = saved
        self.assertGreater(data.count(b"BZh9"), 1)
        self.assertEqual(bz2.decompress(data), TEXT)
        self.assertEqual(gpucomp.decompress(data), TEXT)

    def test_flushed(self):
        c = gpucomp.BZ2Compressor()
        c.flush()
        self.assertRaises(ValueError, c.compress, b"x")
        self.assertRaises(ValueError, c.flush)

    def test_bad_args(self):
        self.assertRaises(TypeError, gpucomp.BZ2Compressor, [])
        self.assertRaises(ValueError, gpucomp.BZ2Compressor, 0)
        self.assertRaises(ValueError, gpucomp.BZ2Compressor, 10)
        c = gpucomp.BZ2Compressor()
        self.assertRaises(TypeError, c.compress)
        self.assertRaises(TypeError, c.compress, "text")

    def test_pickle(self):
        for proto in range(pickle.HIGHEST_PROTOCOL + 1):
            with self.assertRaises(TypeError):
                pickle.dumps(gpucomp.BZ2Compressor(), proto)
            with self.assertRaises(TypeError):
                pickle.dumps(gpucomp.BZ2Decompressor(), proto)


class DecompressorTest(BackendMixin, unittest.TestCase):
    def test_decompress(self):
        d = gpucomp.BZ2Decompressor()
        self.assertEqual(d.decompress(DATA), TEXT)
        self.assertTrue(d.eof)
        self.assertFalse(d.needs_input)
        self.assertEqual(d.unused_data, b"")

    def test_decompress_chunks(self):
        d = gpucomp.BZ2Decompressor()
        out = b"".join(d.decompress(DATA[i:i + 10]) for i in range(0, len(DATA), 10))
        self.assertEqual(out, TEXT)
        self.assertTrue(d.eof)

    def test_decompress_byte_by_byte(self):
        d = gpucomp.BZ2Decompressor()
        out = b"".join(d.decompress(DATA[i:i + 1]) for i in range(len(DATA)))
        self.assertEqual(out, TEXT)

    def test_unused_data(self):
        unused = b"this is unused data"
        d = gpucomp.BZ2Decompressor()
        self.assertEqual(d.decompress(DATA + unused), TEXT)
        self.assertEqual(d.unused_data, unused)
        d = gpucomp.BZ2Decompressor()
        self.assertEqual(d.decompress(DATA * 2), TEXT)
        self.assertEqual(d.unused_data, DATA)

    def test_eof_error(self):
        d = gpucomp.BZ2Decompressor()
        d.decompress(DATA)
        with self.assertRaisesRegex(EOFError, "End of stream already reached"):
            d.decompress(b"anything")

    def test_max_length(self):
        d = gpucomp.BZ2Decompressor()
        out = [d.decompress(DATA, max_length=100)]
        self.assertEqual(len(out[0]), 100)
        self.assertFalse(d.needs_input)
        self.assertFalse(d.eof)
        out.append(d.decompress(b"", max_length=0))
        self.assertEqual(out[-1], b"")
        while not d.eof:
            out.append(d.decompress(b"", max_length=100))
            self.assertLessEqual(len(out[-1]), 100)
        self.assertEqual(b"".join(out), TEXT)

    def test_max_length_unused(self):
        d = gpucomp.BZ2Decompressor()
        first = d.decompress(DATA + b"tail", max_length=10)
        self.assertEqual(d.unused_data, b"")  # not yet: the output is not all out
        rest = d.decompress(b"more")
        self.assertEqual(first + rest, TEXT)
        self.assertEqual(d.unused_data, b"tailmore")

    def test_needs_input(self):
        d = gpucomp.BZ2Decompressor()
        self.assertTrue(d.needs_input)
        self.assertEqual(d.decompress(DATA[:20]), b"")
        self.assertTrue(d.needs_input)
        self.assertFalse(d.eof)

    def test_bad_data(self):
        for bad in (BAD_DATA, b"BZh0", b"BZh9AAAAAA", b"\x00"):
            with self.assertRaisesRegex(OSError, "Invalid data stream"):
                gpucomp.BZ2Decompressor().decompress(bad)

    def test_crc_error(self):
        damaged = bytearray(DATA)
        damaged[-5] ^= 0x01  # the stream's CRC
        with self.assertRaises(OSError):
            gpucomp.BZ2Decompressor().decompress(bytes(damaged))

    def test_empty_stream(self):
        d = gpucomp.BZ2Decompressor()
        self.assertEqual(d.decompress(EMPTY_DATA), b"")
        self.assertTrue(d.eof)

    def test_marker_across_calls(self):
        # the end marker split between two inputs at every byte
        for cut in range(len(DATA) - 12, len(DATA)):
            d = gpucomp.BZ2Decompressor()
            self.assertEqual(d.decompress(DATA[:cut]) + d.decompress(DATA[cut:]), TEXT)
            self.assertTrue(d.eof)


class BZ2FileTest(BackendMixin, unittest.TestCase):
    def setUp(self):
        fd, self.filename = tempfile.mkstemp()
        os.close(fd)

    def tearDown(self):
        os.unlink(self.filename)
        super().tearDown()

    def write_raw(self, data):
        with open(self.filename, "wb") as f:
            f.write(data)

    def test_read(self):
        self.write_raw(DATA)
        with gpucomp.BZ2File(self.filename) as f:
            self.assertRaises(TypeError, f.read, float())
            self.assertEqual(f.read(), TEXT)

    def test_read_multi_stream_and_junk(self):
        self.write_raw(DATA * 5 + BAD_DATA)
        with gpucomp.BZ2File(self.filename) as f:
            self.assertEqual(f.read(), TEXT * 5)

    def test_read_truncated(self):
        self.write_raw(DATA[:-10])
        with gpucomp.BZ2File(self.filename) as f:
            self.assertRaises(EOFError, f.read)

    def test_read_bad(self):
        self.write_raw(BAD_DATA)
        with gpucomp.BZ2File(self.filename) as f:
            self.assertRaises(OSError, f.read)

    def test_readline_lines_iter(self):
        self.write_raw(DATA)
        with gpucomp.BZ2File(self.filename) as f:
            self.assertEqual(f.readline(), TEXT_LINES[0])
            self.assertEqual(f.readlines(), TEXT_LINES[1:])
        with gpucomp.BZ2File(self.filename) as f:
            self.assertEqual(list(iter(f)), TEXT_LINES)

    def test_write_read(self):
        with gpucomp.BZ2File(self.filename, "w") as f:
            self.assertRaises(TypeError, f.write)
            self.assertEqual(f.write(TEXT), len(TEXT))
            self.assertEqual(f.tell(), len(TEXT))
        with open(self.filename, "rb") as f:
            self.assertEqual(bz2.decompress(f.read()), TEXT)

    def test_write_lines_memoryview(self):
        with gpucomp.BZ2File(self.filename, "w", compresslevel=1) as f:
            f.writelines(TEXT_LINES)
            f.write(memoryview(TEXT).cast("B"))
        with bz2.BZ2File(self.filename) as f:
            self.assertEqual(f.read(), TEXT * 2)

    def test_append(self):
        with gpucomp.BZ2File(self.filename, "w") as f:
            f.write(TEXT)
        with gpucomp.BZ2File(self.filename, "a") as f:
            f.write(TEXT)
        with gpucomp.BZ2File(self.filename) as f:
            self.assertEqual(f.read(), TEXT * 2)

    def test_exclusive(self):
        self.assertRaises(FileExistsError, gpucomp.BZ2File, self.filename, "x")
        os.unlink(self.filename)
        with gpucomp.BZ2File(self.filename, "x") as f:
            f.write(TEXT)
        with gpucomp.BZ2File(self.filename) as f:
            self.assertEqual(f.read(), TEXT)

    def test_seek_tell(self):
        self.write_raw(DATA * 2)
        with gpucomp.BZ2File(self.filename) as f:
            f.seek(555)
            self.assertEqual(f.tell(), 555)
            self.assertEqual(f.read(10), (TEXT * 2)[555:565])
            f.seek(-150, io.SEEK_END)
            self.assertEqual(f.read(), TEXT[-150:])
            f.seek(-40, io.SEEK_CUR)
            self.assertEqual(f.read(), TEXT[-40:])
            f.seek(0)
            self.assertEqual(f.read(5), TEXT[:5])
            self.assertEqual(f.seek(len(TEXT) * 10), len(TEXT) * 2)
            self.assertRaises(ValueError, f.seek, -1, 3)

    def test_modes_and_closed(self):
        self.write_raw(DATA)
        f = gpucomp.BZ2File(self.filename)
        self.assertTrue(f.readable())
        self.assertTrue(f.seekable())
        self.assertFalse(f.writable())
        self.assertRaises(OSError, f.write, b"x")
        f.close()
        self.assertTrue(f.closed)
        self.assertRaises(ValueError, f.read)
        f.close()
        with gpucomp.BZ2File(self.filename, "w") as f:
            self.assertRaises(OSError, f.read)
            self.assertFalse(f.seekable())
        for bad in ("z", "rw", "rt", "wbt"):
            self.assertRaises(ValueError, gpucomp.BZ2File, self.filename, bad)
        self.assertRaises(ValueError, gpucomp.BZ2File, self.filename, "w", compresslevel=0)

    def test_file_objects(self):
        buf = io.BytesIO()
        with gpucomp.BZ2File(buf, "w") as f:
            f.write(TEXT)
        self.assertFalse(buf.closed)
        with gpucomp.BZ2File(io.BytesIO(buf.getvalue())) as f:
            self.assertEqual(f.read(), TEXT)
        self.assertRaises(TypeError, gpucomp.BZ2File, 123.0)

    def test_peek_read1_readinto(self):
        self.write_raw(DATA)
        with gpucomp.BZ2File(self.filename) as f:
            self.assertTrue(TEXT.startswith(f.peek()))
            chunk = f.read1(50)
            self.assertTrue(TEXT.startswith(chunk))
            b = bytearray(100)
            self.assertEqual(f.readinto(b), 100)
            self.assertEqual(bytes(b), TEXT[len(chunk):len(chunk) + 100])

    def test_open_text(self):
        text = TEXT.decode("ascii")
        with gpucomp.open(self.filename, "wt", encoding="ascii", newline="\r\n") as f:
            f.write(text)
        with gpucomp.open(self.filename, "rb") as f:
            self.assertEqual(f.read(), text.replace("\n", "\r\n").encode())
        with gpucomp.open(self.filename, "rt", encoding="ascii", newline="\r\n") as f:
            self.assertEqual(f.read(), text.replace("\n", "\r\n"))
        self.assertRaises(ValueError, gpucomp.open, self.filename, "wbt")
        self.assertRaises(ValueError, gpucomp.open, self.filename, "rb", encoding="utf-8")
        self.assertRaises(ValueError, gpucomp.open, self.filename, "rb", newline="\n")


class GilTest(unittest.TestCase):
    def test_gil_released(self):
        # While one thread compresses, this one keeps running Python code: it
        # could not if the call held the GIL.
        data = big_data(4 << 20)
        started, done = threading.Event(), threading.Event()
        result = []

        def work():
            started.set()
            result.append(gpucomp.compress(data, 9))
            done.set()

        t = threading.Thread(target=work)
        ticks = 0
        t.start()
        started.wait()
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)
        t.join()
        self.assertEqual(bz2.decompress(result[0]), data)
        self.assertGreater(ticks, 5)

    def test_threads_at_once(self):
        data = [big_data(1 << 19)[: (1 << 19) - i] for i in range(4)]
        out = [None] * 4

        def work(i):
            out[i] = gpucomp.decompress(gpucomp.compress(data[i], 5))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(out, data)


class ServiceTest(unittest.TestCase):
    def test_stats(self):
        if EXPECT not in ("cpu", "gpu"):
            with self.assertRaises(gpucomp.ServiceError) as cm:
                gpucomp.stats(socket="/nonexistent/gpucompd.sock")
            self.assertIsInstance(cm.exception, OSError)
            self.assertEqual(cm.exception.errno, 10)  # GPUCOMP_E_CONNECT
            return
        before = gpucomp.stats()
        gpucomp.compress(TEXT)
        after = gpucomp.stats()
        self.assertEqual(after["requests_ok"], before["requests_ok"] + 1)
        self.assertIn(after["backend"], ("cpu", "gpu"))
        self.assertIsInstance(after["devices"], list)

    def test_versions(self):
        self.assertRegex(gpucomp.library_version(), r"^\d+\.\d+\.\d+")


if __name__ == "__main__":
    unittest.main()
