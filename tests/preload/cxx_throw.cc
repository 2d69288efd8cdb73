// SPDX-License-Identifier: MIT
// C++ exceptions under the shim: cxx_throw N throws and catches N
// exceptions through a few frames, calls glibc's backtrace() once, and
// prints how many were caught, whether libunwind is mapped, whether its
// symbols are in the global scope (where they would take the place of
// libgcc's and glibc's for any library that looks them up), and which
// object the program's _Unwind_RaiseException comes from.
#include <dlfcn.h>
#include <execinfo.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

static int __attribute__((noinline)) deep(int n, int i)
{
	if (n == 0)
		throw std::runtime_error("thrown");
	return deep(n - 1, i) + i;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, caught = 0;
	for (long i = 0; i < n; i++) {
		try {
			deep(4, (int)i);
		} catch (const std::runtime_error &e) {
			caught += strcmp(e.what(), "thrown") == 0;
		}
	}
	void *frames[16];
	int depth = backtrace(frames, 16);
	int mapped = 0;
	char line[512];
	FILE *m = fopen("/proc/self/maps", "r");
	while (m && fgets(line, sizeof(line), m))
		mapped |= strstr(line, "libunwind") != nullptr;
	if (m)
		fclose(m);
	Dl_info di;
	void *raise = dlsym(RTLD_DEFAULT, "_Unwind_RaiseException");
	const char *from = raise && dladdr(raise, &di) && di.dli_fname ? di.dli_fname : "?";
	const char *slash = strrchr(from, '/');
	printf("caught=%ld backtrace=%d libunwind=%d unw_global=%d raise_from=%s\n", caught,
	       depth > 1, mapped, dlsym(RTLD_DEFAULT, "unw_backtrace") != nullptr,
	       slash ? slash + 1 : from);
	return caught == n ? 0 : 1;
}
