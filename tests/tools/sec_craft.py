# SPDX-License-Identifier: MIT
# Crafting records for the tests of issue 45 (records are untrusted input):
#   sec_craft.py OFFSETS GOOD DST REAL_PID FAKE_PID [FIELD:FORMAT:VALUE ...]
# copies the record GOOD (of REAL_PID) to DST under FAKE_PID and writes each
# patch in, at the header's offsets (tests/tools/live_offsets).  FORMAT: a
# struct format, s a string (NUL added), x hex bytes (NUL added), size a
# length to make the file (sparse when longer: truncate(2)).
import os, struct, sys

offs = {}
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) == 3:
        offs[w[0]] = (int(w[1]), int(w[2]))
b = bytearray(open(sys.argv[2], 'rb').read())
dst, real, fake = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
o = offs['pid'][0]
assert b[:6] == b'PSLIVE' and struct.unpack_from('<i', b, o)[0] == real, 'header layout moved'
struct.pack_into('<i', b, o, fake)
size = None
for p in sys.argv[6:]:
    field, fmt, val = p.split(':', 2)
    off, n = offs.get(field, (0, 0))
    if fmt == 'size':
        size = int(val)
    elif fmt in ('s', 'x'):
        v = val.encode() if fmt == 's' else bytes.fromhex(val)
        assert len(v) < n, field + ' too long'
        b[off:off + len(v) + 1] = v + b'\0'
    else:
        struct.pack_into('<' + fmt, b, off, int(val, 0))
with open(dst, 'wb') as f:
    f.write(b)
    if size is not None:
        f.truncate(size)
