#!/bin/sh
# The programs in docs/examples (built by make check against the library)
# work as their comments say, against a gpucompd of their own: compress_file
# and stream_pipe round trips (bunzip2 reads what they write, and the stream's
# bzip2 is byte for byte the buffer API's), async_many verifies its round
# trips, and every failure is a message and a non-zero exit.
daemon=${GPUCOMPD:-$(pwd)/daemon/gpucompd}
ex=$(dirname "$(dirname "$daemon")")/docs/examples
tmp=$(mktemp -d) || exit 1
"$daemon" --socket "$tmp/sock" --log-level warning 2>"$tmp/log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 200); do [ -S "$tmp/sock" ] && break; sleep 0.05; done
GPUCOMP_SOCKET=$tmp/sock; export GPUCOMP_SOCKET
fail=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fail=1; }

# Input: 3 MiB of text-like data (over the memfd threshold, several bzip2 blocks).
seq 1 450000 | head -c 3145728 >"$tmp/in"

"$ex/compress_file" "$tmp/in" "$tmp/in.bz2" >/dev/null && ok "compress_file compresses" || bad "compress_file"
if command -v bunzip2 >/dev/null 2>&1; then
    bunzip2 -c "$tmp/in.bz2" | cmp -s - "$tmp/in" && ok "bunzip2 reads compress_file's output" \
        || bad "bunzip2 cannot read compress_file's output"
fi
"$ex/compress_file" -d "$tmp/in.bz2" "$tmp/back" >/dev/null && cmp -s "$tmp/back" "$tmp/in" \
    && ok "compress_file -d round trip" || bad "compress_file -d round trip"
"$ex/compress_file" -r "$tmp/in" "$tmp/in.rle" >/dev/null && "$ex/compress_file" -r -d "$tmp/in.rle" "$tmp/back.rle" >/dev/null \
    && cmp -s "$tmp/back.rle" "$tmp/in" && ok "compress_file -r round trip" || bad "compress_file -r round trip"
: >"$tmp/empty"
"$ex/compress_file" "$tmp/empty" "$tmp/empty.bz2" >/dev/null && "$ex/compress_file" -d "$tmp/empty.bz2" "$tmp/empty.back" >/dev/null \
    && cmp -s "$tmp/empty.back" "$tmp/empty" && ok "compress_file on an empty file" || bad "compress_file on an empty file"

# Failures: a message on stderr and status 1, no output file.
if "$ex/compress_file" "$tmp/no-such-file" "$tmp/x" 2>"$tmp/err"; then bad "missing input succeeded"
elif [ -s "$tmp/err" ] && [ ! -e "$tmp/x" ]; then ok "missing input: $(cat "$tmp/err")"
else bad "missing input: no message or an output file"; fi
if "$ex/compress_file" -d "$tmp/in" "$tmp/x" 2>"$tmp/err"; then bad "decompressing plain text succeeded"
elif grep -q 'compress_file: ' "$tmp/err" && [ ! -e "$tmp/x" ]; then ok "corrupt input: $(cat "$tmp/err")"
else bad "corrupt input: no message or an output file"; fi
if GPUCOMP_SOCKET=$tmp/nothing "$ex/compress_file" "$tmp/in" "$tmp/x" 2>"$tmp/err"; then bad "no daemon succeeded"
elif grep -q 'connect: ' "$tmp/err"; then ok "no daemon: $(cat "$tmp/err")"
else bad "no daemon: no message"; fi
if "$ex/compress_file" "$tmp/in" "$tmp/no-such-dir/out" 2>"$tmp/err"; then bad "unwritable output succeeded"
elif [ -s "$tmp/err" ]; then ok "unwritable output: $(cat "$tmp/err")"
else bad "unwritable output: no message"; fi

"$ex/stream_pipe" <"$tmp/in" >"$tmp/in.sbz2" && cmp -s "$tmp/in.sbz2" "$tmp/in.bz2" \
    && ok "stream_pipe writes the buffer API's bytes" || bad "stream_pipe compress differs from gpucomp_compress"
"$ex/stream_pipe" -d <"$tmp/in.sbz2" | cmp -s - "$tmp/in" && ok "stream_pipe -d round trip" || bad "stream_pipe -d round trip"
"$ex/stream_pipe" -r <"$tmp/in" | cmp -s - "$tmp/in.rle" && ok "stream_pipe -r writes the buffer API's bytes" \
    || bad "stream_pipe -r compress differs from gpucomp_compress"
if "$ex/stream_pipe" -d <"$tmp/in" >/dev/null 2>"$tmp/err"; then bad "stream_pipe -d of plain text succeeded"
elif grep -q 'stream_pipe: ' "$tmp/err"; then ok "stream_pipe corrupt input: $(cat "$tmp/err")"
else bad "stream_pipe corrupt input: no message"; fi

"$ex/async_many" 300 >"$tmp/out" 2>&1 && grep -q '300 round trips verified' "$tmp/out" \
    && ok "$(cat "$tmp/out")" || { bad "async_many"; cat "$tmp/out"; }
if GPUCOMP_SOCKET=$tmp/nothing "$ex/async_many" 5 2>"$tmp/err"; then bad "async_many without a daemon succeeded"
elif grep -q 'connect: ' "$tmp/err"; then ok "async_many without a daemon: $(cat "$tmp/err")"
else bad "async_many without a daemon: no message"; fi

kill -0 $pid 2>/dev/null && ok "the daemon is still running" || { bad "the daemon died"; cat "$tmp/log"; }
exit $fail
