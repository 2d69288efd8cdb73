#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fuzz the record reader (issue 45: records are untrusted input).

    fuzz_records.py --tools DIR --offsets FILE --seeds REC... [--count N] [--batch B]
                    [--seed S] [--keep-crashes DIR]

Mutates the seed records (real records: a killed process's, one with a
call-site table, one with a kept report) and passes each through
`poolshim stat`, `stat --prometheus`, `collect --into` and `collect`
(reports printed), built with ASan and UBSan (configure
--enable-sanitizers; tests/tools/fuzz_quick.sh runs this script): any
sanitizer report, death by a signal or a tool past 20 s is a finding,
and the record is saved.  Records are made nobody's (chown 65534) so that collect, run as
root, writes nothing but as nobody; collect always runs with --keep.
Mutations: random bytes, bytes in the header's fields (tests/tools/
live_offsets), boundary values in numeric fields, strings without their
NUL or with control bytes, the call-site region and the kept report
damaged, the file cut short or made sparse.  B records go through the
tools at once; a batch with a finding is rerun one record at a time.
"""
import argparse, os, random, shutil, struct, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument('--tools', required=True)
ap.add_argument('--offsets', required=True)
ap.add_argument('--seeds', nargs='+', required=True)
ap.add_argument('--count', type=int, default=3000)
ap.add_argument('--batch', type=int, default=25)
ap.add_argument('--seed', type=int, default=45)
ap.add_argument('--keep-crashes', default='fuzz-crashes')
a = ap.parse_args()
rnd = random.Random(a.seed)

offs = {}
for line in open(a.offsets):
    w = line.split()
    if len(w) == 3:
        offs[w[0]] = (int(w[1]), int(w[2]))
    elif len(w) == 2:
        offs[w[0]] = (int(w[1]), 0)
HEADER = offs['header'][0]
seeds = []
for path in a.seeds:
    b = bytes(open(path, 'rb').read())
    assert b[:6] == b'PSLIVE', path
    pid = struct.unpack_from('<i', b, offs['pid'][0])[0]
    ns = struct.unpack_from('<Q', b, offs['pidns'][0])[0]
    seeds.append((b, pid, ns))
NUMERIC = [f for f in ('version', 'max_blocks', 'block_size', 'block_stride', 'nblocks',
                       'starttime', 'flags', 'end', 'exit_status', 'report', 'stats_format',
                       'start_time', 'usage_time', 'blob_off', 'blob_len', 'sites_off',
                       'sites_len') if f in offs]
STRINGS = [f for f in ('program', 'stats', 'run', 'report_error', 'heap_owner',
                       'shim_version', 'host', 'kernel', 'config') if f in offs]
EDGES = [0, 1, 2, 3, 4, 127, 128, 129, 255, 256, 4095, 4096, 4097, 8192, 0x7fffffff,
         0x80000000, 0xffffffff, 0x100000000, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


def mutate(b, fake):
    b = bytearray(b)
    struct.pack_into('<i', b, offs['pid'][0], fake)
    for _ in range(rnd.choice([1, 1, 1, 2, 3, 5])):
        try:
            one(b)
        except (IndexError, struct.error):
            pass   # a record already cut short: the next mutation
    return bytes(b)


def one(b):
    """One mutation of b, in place."""
    m = rnd.randrange(9)
    if m == 0:      # random bytes anywhere in the header
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(HEADER)] = rnd.randrange(256)
    elif m == 1:    # a numeric field to an edge or a random value
        f = rnd.choice(NUMERIC)
        off, size = offs[f]
        v = rnd.choice(EDGES + [rnd.getrandbits(size * 8)]) % (1 << (size * 8))
        b[off:off + size] = v.to_bytes(size, 'little')
    elif m == 2:    # a string field: no NUL, control bytes, C1, bad UTF-8
        f = rnd.choice(STRINGS)
        off, size = offs[f]
        junk = bytes(rnd.choice([0x1b, 0x07, 0x9b, 0xc2, 0xff, 0x0a, 0x41, 0x2f, 0x25, 0x3d, 0x7f])
                     for _ in range(rnd.randint(1, size)))
        b[off:off + len(junk)] = junk
    elif m == 3:    # bytes in the blocks, the call-site region or the kept report
        if len(b) > HEADER:
            for _ in range(rnd.randint(1, 64)):
                b[rnd.randrange(HEADER, len(b))] = rnd.randrange(256)
    elif m == 4:    # cut short
        del b[rnd.randrange(len(b)):]
    elif m == 5:    # grown (sparse once written: zeros past the end)
        b.extend(bytes(rnd.choice([1, 4096, 65536, 200000])))
    elif m == 6 and 'sites_off' in offs:   # the call-site region moved
        off, _ = offs['sites_off']
        struct.pack_into('<Q', b, off, rnd.choice([HEADER, 4096 * rnd.randrange(1, 8000), len(b)]))
    elif m == 7:    # a byte of the config text
        off, size = offs['config']
        b[off + rnd.randrange(size)] = rnd.randrange(256)
    elif m == 8:    # the pid of another record (a name that lies)
        o = offs['pid'][0]
        struct.pack_into('<i', b, o, struct.unpack_from('<i', b, o)[0] + rnd.choice([1, -1]))


def write_sparse(path, data):
    """data to path, pages of zeros left as holes (the call-site record is
    mostly unreserved block room: written whole, each copy costs 27 MB)."""
    with open(path, 'wb') as f:
        for o in range(0, len(data), 4096):
            page = data[o:o + 4096]
            if page.count(0) == len(page):
                f.seek(len(page), 1)
            else:
                f.write(page)
        f.truncate(len(data))
    os.chown(path, 65534, 65534)


def fresh(*dirs):
    """Each of dirs made anew, empty, mode 1777."""
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
        os.mkdir(d)
        os.chmod(d, 0o1777)


def bad(res):
    """Why a tool's run is a finding, or None."""
    if res is None:
        return 'past 20 s'
    err = res.stderr.decode('utf-8', 'replace')
    for k in ('AddressSanitizer', 'runtime error:', 'LeakSanitizer', 'UndefinedBehaviorSanitizer'):
        if k in err:
            return k + ': ' + err[err.index(k):][:400]
    if res.returncode < 0 or res.returncode >= 124:
        return 'exit %d' % res.returncode
    return None


env = dict(os.environ, ASAN_OPTIONS='detect_leaks=0:abort_on_error=0',
           UBSAN_OPTIONS='print_stacktrace=1:halt_on_error=1')
env.pop('POOLSHIM_LIVE_DIR', None)
env.pop('LD_PRELOAD', None)
stat = os.path.join(a.tools, 'poolshim-stat')
collect = os.path.join(a.tools, 'poolshim-collect')


def run_all(live, into):
    out = []
    for cmd in ([stat, '--live-dir', live, '--all-users'],
                [stat, '--live-dir', live, '--all-users', '--prometheus'],
                [collect, '--live-dir', live, '--keep', '--into', into],
                [collect, '--live-dir', live, '--keep']):
        try:
            res = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, timeout=20)
        except subprocess.TimeoutExpired:
            res = None
        why = bad(res)
        if why:
            out.append((' '.join(cmd[:1] + cmd[3:]), why))
    return out


work = tempfile.mkdtemp(prefix='psfuzz.')
os.chmod(work, 0o755)
live, into = os.path.join(work, 'live'), os.path.join(work, 'into')
os.makedirs(a.keep_crashes, exist_ok=True)
findings = 0
done = 0
rendered = 0   # records that got as far as a report (collect --into wrote one)
base = 4200000
try:
    while done < a.count:
        fresh(live, into)
        batch = []
        for i in range(min(a.batch, a.count - done)):
            b, pid, ns = rnd.choice(seeds)
            fake = base + done + i
            data = mutate(b, fake)
            path = os.path.join(live, 'poolshim-%d-%d.stats' % (fake, ns))
            write_sparse(path, data)
            batch.append((path, data))
        found = run_all(live, into)
        rendered += len(os.listdir(into))
        if found:
            # One at a time, to know which.
            for path, data in batch:
                fresh(live, into)
                write_sparse(path, data)
                for cmd, why in run_all(live, into):
                    findings += 1
                    keep = os.path.join(a.keep_crashes, os.path.basename(path))
                    shutil.copy(path, keep)
                    print('FINDING %s: %s: %s' % (keep, cmd, why), flush=True)
        done += len(batch)
        if done % 500 < a.batch or os.environ.get("FUZZ_VERBOSE"):
            print('%d records, %d rendered, %d findings' % (done, rendered, findings), flush=True)
finally:
    shutil.rmtree(work, ignore_errors=True)
print('done: %d mutated records through 4 tools, %d rendered into a report, %d findings'
      % (done, rendered, findings))
sys.exit(1 if findings else 0)
