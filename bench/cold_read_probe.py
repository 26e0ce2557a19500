# `sudo python3 bench/cold_read_probe.py FILE [NAMES]`: cold-read strategies on one file, the page cache
# dropped before each (needs root): stripes per thread vs pieces claimed in turn, buffered vs
# O_DIRECT, shared vs own descriptors, readahead advice; buffered and O_DIRECT `dd` for reference.
# Prints the block device queue settings that decide readahead.
import mmap, os, sys, threading, time, subprocess
path = sys.argv[1]
only = sys.argv[2].split(',') if len(sys.argv) > 2 else None
size = os.path.getsize(path)
MiB = 1 << 20
dev = os.environ.get('DEVICE', 'vda')
for q in ('read_ahead_kb', 'max_sectors_kb', 'max_hw_sectors_kb', 'nr_requests', 'rotational', 'scheduler'):
    try: print(q, open(f'/sys/block/{dev}/queue/{q}').read().strip())
    except Exception as e: print(q, e)
try: print('mq queues', len(os.listdir(f'/sys/block/{dev}/mq')))
except Exception as e: print(e)
def drop():
    os.sync(); open('/proc/sys/vm/drop_caches', 'w').write('3\n')
def run(name, threads, req, layout, direct=False, own_fd=True, advice=None, willneed_ahead=0):
    drop()
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    shared = os.open(path, flags)
    lock = threading.Lock(); nxt = [0]
    end = size if not direct else size // 4096 * 4096
    def worker(i):
        fd = os.open(path, flags) if own_fd else shared
        if advice is not None: os.posix_fadvise(fd, 0, 0, advice)
        buf = mmap.mmap(-1, req); mv = memoryview(buf)
        if layout == 'stripe':
            per = -(-end // threads); per = -(-per // MiB) * MiB
            lo, hi = i * per, min(end, (i + 1) * per)
            pos = lo; ahead = lo
            while pos < hi:
                if willneed_ahead and ahead < hi and ahead - pos < willneed_ahead:
                    n = min(willneed_ahead, hi - ahead); os.posix_fadvise(fd, ahead, n, os.POSIX_FADV_WILLNEED); ahead += n
                n = min(req, hi - pos)
                if direct and n % 4096: n = n // 4096 * 4096 or 4096
                got = os.preadv(fd, [mv[:n]], pos)
                if got <= 0: break
                pos += got
        else:
            while True:
                with lock:
                    pos = nxt[0]; nxt[0] += req
                if pos >= end: break
                n = min(req, end - pos)
                os.preadv(fd, [mv[:n]], pos)
        if own_fd: os.close(fd)
    th = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t = time.perf_counter()
    for x in th: x.start()
    for x in th: x.join()
    dt = time.perf_counter() - t
    os.close(shared)
    print(f'{name:44s} {dt:6.2f} s  {end/dt/1e9:5.2f} GB/s', flush=True)
S = os.POSIX_FADV_SEQUENTIAL
strategies = {
  'interleave16-4M-shared':      dict(threads=16, req=4*MiB, layout='claim', own_fd=False),
  'stripe16-8M-shared':          dict(threads=16, req=8*MiB, layout='stripe', own_fd=False),
  'stripe16-8M-own':             dict(threads=16, req=8*MiB, layout='stripe'),
  'stripe16-8M-own-seq':         dict(threads=16, req=8*MiB, layout='stripe', advice=S),
  'stripe16-16M-own-seq':        dict(threads=16, req=16*MiB, layout='stripe', advice=S),
  'stripe32-8M-own-seq':         dict(threads=32, req=8*MiB, layout='stripe', advice=S),
  'stripe64-4M-own-seq':         dict(threads=64, req=4*MiB, layout='stripe', advice=S),
  'stripe16-8M-willneed64M':     dict(threads=16, req=8*MiB, layout='stripe', advice=S, willneed_ahead=64*MiB),
  'stripe8-16M-own-seq':         dict(threads=8, req=16*MiB, layout='stripe', advice=S),
  'direct-interleave16-4M':      dict(threads=16, req=4*MiB, layout='claim', direct=True, own_fd=False),
  'direct-interleave32-8M':      dict(threads=32, req=8*MiB, layout='claim', direct=True, own_fd=False),
  'direct-interleave64-2M':      dict(threads=64, req=2*MiB, layout='claim', direct=True, own_fd=False),
  'direct-stripe16-16M':         dict(threads=16, req=16*MiB, layout='stripe', direct=True),
  'direct-interleave32-1M':      dict(threads=32, req=1*MiB, layout='claim', direct=True, own_fd=False),
}
for rep in range(int(os.environ.get('REPS', '1'))):
    for name, kw in strategies.items():
        if only and name not in only: continue
        run(name, **kw)
    for cmd in (['dd', f'if={path}', 'of=/dev/null', 'bs=16M'], ['dd', f'if={path}', 'of=/dev/null', 'bs=16M', 'iflag=direct']):
        drop(); t = time.perf_counter(); subprocess.run(cmd, capture_output=True); dt = time.perf_counter() - t
        print(f'{" ".join(cmd[3:]):44s} {dt:6.2f} s  {size/dt/1e9:5.2f} GB/s', flush=True)
