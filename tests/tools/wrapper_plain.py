# SPDX-License-Identifier: MIT
# For wrapper_plain.sh: one scenario of issue 45 run by a caller, with the
# program started as PREFIX + program (PREFIX: nothing, or the `poolshim`
# command).  Prints one line that the test compares between the two.
#   wrapper_plain.py CASE DIR HELPER [PREFIX ...]
import ctypes, os, signal, subprocess, sys, time

case, tmp, helper = sys.argv[1:4]
prefix = sys.argv[4:]
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def wait_file(path, limit=20.0):
    end = time.time() + limit
    while not os.path.exists(path):
        if time.time() > end:
            return False
        time.sleep(0.01)
    return True


def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def program_of(pid, comm):
    """The process running the program: pid itself, or its child (the old wrapper)."""
    end = time.time() + 10
    while time.time() < end:
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().strip() == comm:
                    return pid
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = [int(k) for k in f.read().split()]
            for k in kids:
                with open("/proc/%d/comm" % k) as f:
                    if f.read().strip() == comm:
                        return k
        except OSError:
            pass
        time.sleep(0.01)
    return -1


def status_words(st):
    if os.WIFEXITED(st):
        return "exit %d" % os.WEXITSTATUS(st)
    if os.WIFSIGNALED(st):
        return "signal %d core %d" % (os.WTERMSIG(st), 1 if os.WCOREDUMP(st) else 0)
    return "status %d" % st


def count_rt(how):
    """SIGRTMIN+1 (it queues: two sent are two delivered) sent as `how` says; how many arrived."""
    ready, out = os.path.join(tmp, "rt.ready"), os.path.join(tmp, "rt.out")
    for f in (ready, out):
        if os.path.exists(f):
            os.unlink(f)
    p = subprocess.Popen(prefix + [helper, "countrt", "1", ready, out], start_new_session=True,
                         stderr=subprocess.DEVNULL)
    if not wait_file(ready):
        p.kill()
        return "never ready"
    prog = program_of(p.pid, "run_helper")
    sig = signal.SIGRTMIN + 1
    if how == "group":
        os.killpg(p.pid, sig)
    else:
        # Each process of the job once, as a cgroup kill does.
        for pid in sorted({p.pid, prog}):
            os.kill(pid, sig)
    p.wait()
    with open(out) as f:
        return f.read().strip()


if case == "stopcont":
    # STOP then CONT sent to the program's own pid: the caller's wait returns when it ends.
    pidf = os.path.join(tmp, "sc.pid")
    if os.path.exists(pidf):
        os.unlink(pidf)
    t0 = time.time()
    p = subprocess.Popen(prefix + ["sh", "-c", 'echo $$ > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 1', pidf],
                         stderr=subprocess.DEVNULL)
    wait_file(pidf)
    c = int(open(pidf).read())
    os.kill(c, signal.SIGSTOP)
    time.sleep(0.2)
    os.kill(c, signal.SIGCONT)
    try:
        rc = p.wait(timeout=5)
        print("rc %d within 5 s" % rc, "under 3 s" if time.time() - t0 < 3 else "slow")
    except subprocess.TimeoutExpired:
        print("hung: wrapper %s, program %s" % (state(p.pid), state(c)))
        for pid in {p.pid, c}:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        p.wait()
elif case == "twice":
    print("each process of the job:", count_rt("each"), "| the process group:", count_rt("group"))
elif case == "pdeathsig":
    # A supervisor whose child sets PR_SET_PDEATHSIG and execs the program; the supervisor ends.
    pidf = os.path.join(tmp, "pd.pid")
    if os.path.exists(pidf):
        os.unlink(pidf)
    sup = os.fork()
    if sup == 0:
        c = os.fork()
        if c == 0:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.execvp((prefix + ["sh"])[0], prefix + ["sh", "-c", 'echo $$ > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 3', pidf])
        wait_file(pidf)
        os._exit(0)
    os.waitpid(sup, 0)
    wait_file(pidf)
    prog = int(open(pidf).read())
    end = time.time() + 2
    while state(prog) not in ("gone", "Z") and time.time() < end:
        time.sleep(0.02)
    print("program after its supervisor ended:", "ended" if state(prog) in ("gone", "Z") else "still running")
    try:
        os.kill(prog, signal.SIGKILL)
    except OSError:
        pass
elif case == "core":
    # A program that dumps core: the caller's wait status says so.
    os.chdir(tmp)
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    p = subprocess.Popen(prefix + ["sh", "-c", "kill -QUIT $$"], stderr=subprocess.DEVNULL)
    _, st = os.waitpid(p.pid, 0)
    p.returncode = 0
    print(status_words(st))
elif case == "jobctl":
    res = []
    # ^Z: SIGTSTP to the job's process group; the caller sees the job stop by it.
    p = subprocess.Popen(prefix + ["sleep", "3"], preexec_fn=lambda: os.setpgid(0, 0), stderr=subprocess.DEVNULL)
    prog = program_of(p.pid, "sleep")
    time.sleep(0.1)
    os.killpg(p.pid, signal.SIGTSTP)
    _, st = os.waitpid(p.pid, os.WUNTRACED)
    res.append("tstp: " + ("stopped by %d" % os.WSTOPSIG(st) if os.WIFSTOPPED(st) else status_words(st)))
    os.killpg(p.pid, signal.SIGCONT)
    time.sleep(0.1)
    # kill -STOP of the process the caller started: the program stops.
    os.kill(p.pid, signal.SIGSTOP)
    end = time.time() + 1
    while state(prog) != "T" and time.time() < end:
        time.sleep(0.01)
    res.append("stop: program " + ("stopped" if state(prog) == "T" else "runs"))
    os.killpg(p.pid, signal.SIGCONT)
    # kill -KILL of the process the caller started: the program ends.
    os.kill(p.pid, signal.SIGKILL)
    _, st = os.waitpid(p.pid, 0)
    end = time.time() + 1
    while state(prog) not in ("gone", "Z") and time.time() < end:
        time.sleep(0.01)
    res.append("kill: " + status_words(st) + ", program " + ("ended" if state(prog) in ("gone", "Z") else "orphaned"))
    if state(prog) not in ("gone", "Z"):
        os.kill(prog, signal.SIGKILL)
    print("; ".join(res))
else:
    print("unknown case", case)
    sys.exit(2)
