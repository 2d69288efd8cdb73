// SPDX-License-Identifier: MIT
/*
 * Runs a command where io_uring cannot work, for tests/preload/io_nouring.sh:
 *
 *   io_sandbox [--seccomp EPERM|ENOSYS] [--memlock BYTES] [--drop-ipc-lock] -- cmd args...
 *
 * --seccomp installs a filter (written by hand, no libseccomp) that fails
 * io_uring_setup, io_uring_enter and io_uring_register with that errno;
 * --memlock sets RLIMIT_MEMLOCK (soft and hard); --drop-ipc-lock removes
 * CAP_IPC_LOCK from the bounding, inheritable and ambient sets, so that
 * root, too, is held to the limit after exec.  Then execs the command.
 *
 * "io_sandbox --probe" instead says whether this process may set up an
 * io_uring at all (exit 0 when it may, 1 when not, with the errno).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#define __NR_io_uring_enter 426
#define __NR_io_uring_register 427
#endif

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "io_sandbox: add this architecture's AUDIT_ARCH"
#endif

static int install_seccomp(int err)
{
	struct sock_filter prog[] = {
		/* a foreign architecture's numbers mean nothing here: allow */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
	};
	struct sock_fprog fprog = { .len = sizeof(prog) / sizeof(prog[0]), .filter = prog };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0))
		return -errno;
	return 0;
}

static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	int word = CAP_IPC_LOCK / 32;
	unsigned bit = 1u << (CAP_IPC_LOCK % 32);

	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	/* nothing to drop for a user without it (who may not touch the bounding set) */
	if (geteuid() != 0 && !(data[word].permitted & bit) && !(data[word].inheritable & bit))
		return 0;
	if (prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0))
		return -errno;
	/* ambient may not exist on old kernels: EINVAL is fine */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, CAP_IPC_LOCK, 0, 0) && errno != EINVAL)
		return -errno;
	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	data[word].inheritable &= ~bit;
	data[word].permitted &= ~bit;
	data[word].effective &= ~bit;
	if (syscall(SYS_capset, &hdr, data))
		return -errno;
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: io_sandbox [--seccomp EPERM|ENOSYS] [--memlock BYTES] "
		"[--drop-ipc-lock] -- cmd args...\n");
	return 2;
}

/* io_uring_setup(4, params): 0 when a ring can be created here. */
static int probe(void)
{
	struct { unsigned u[30]; } params;   /* struct io_uring_params is 120 bytes */
	memset(&params, 0, sizeof(params));
	long fd = syscall(__NR_io_uring_setup, 4, &params);
	if (fd < 0) {
		printf("io_uring: unavailable (%s)\n", strerror(errno));
		return 1;
	}
	close((int)fd);
	printf("io_uring: available\n");
	return 0;
}

int main(int argc, char **argv)
{
	int seccomp_err = 0, drop = 0, i;
	long long memlock = -1;

	if (argc == 2 && !strcmp(argv[1], "--probe"))
		return probe();

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--seccomp") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "EPERM"))
				seccomp_err = EPERM;
			else if (!strcmp(argv[i], "ENOSYS"))
				seccomp_err = ENOSYS;
			else
				return usage();
		} else if (!strcmp(argv[i], "--memlock") && i + 1 < argc) {
			memlock = atoll(argv[++i]);
		} else if (!strcmp(argv[i], "--drop-ipc-lock")) {
			drop = 1;
		} else {
			return usage();
		}
	}
	if (i + 1 >= argc)
		return usage();
	if (memlock >= 0) {
		struct rlimit rl = { (rlim_t)memlock, (rlim_t)memlock };
		if (setrlimit(RLIMIT_MEMLOCK, &rl)) {
			perror("io_sandbox: setrlimit(RLIMIT_MEMLOCK)");
			return 77;
		}
	}
	if (drop) {
		int r = drop_ipc_lock();
		if (r) {
			fprintf(stderr, "io_sandbox: cannot drop CAP_IPC_LOCK: %s\n", strerror(-r));
			return 77;
		}
	}
	if (seccomp_err) {
		int r = install_seccomp(seccomp_err);
		if (r) {
			fprintf(stderr, "io_sandbox: cannot install a seccomp filter: %s\n", strerror(-r));
			return 77;
		}
		/* the filter must really answer with the errno asked for */
		errno = 0;
		if (syscall(__NR_io_uring_setup, 4, NULL) != -1 || errno != seccomp_err) {
			fprintf(stderr, "io_sandbox: the filter did not take (errno %d)\n", errno);
			return 99;
		}
	}
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "io_sandbox: exec %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}
