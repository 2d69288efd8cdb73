// SPDX-License-Identifier: MIT
// C++ allocation under the shim: new/delete, arrays, aligned new, nothrow
// new, containers that reallocate.  libstdc++'s operators call malloc, so
// they reach the shim; large arrays must land in the pool.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <dlfcn.h>

static int failures;
#define EXPECT(c)                                                           \
	do {                                                                \
		if (!(c)) {                                                 \
			std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                         \
		}                                                           \
	} while (0)

struct alignas(256) Wide {
	char bytes[512];
};

int main()
{
	auto is_pooled = reinterpret_cast<int (*)(const void *)>(
		dlsym(RTLD_DEFAULT, "poolshim_is_pooled"));
	if (!is_pooled) {
		std::fprintf(stderr, "libpoolshim.so is not loaded\n");
		return 1;
	}

	for (int round = 0; round < 100; round++) {
		auto *big = new char[(1 << 20) + round];
		std::memset(big, round, (1 << 20) + round);
		EXPECT(is_pooled(big) || std::getenv("POOLSHIM"));
		delete[] big;

		auto *w = new Wide[64];
		EXPECT(reinterpret_cast<uintptr_t>(w) % 256 == 0);
		delete[] w;

		auto *n = new (std::nothrow) int[1000];
		EXPECT(n != nullptr);
		delete[] n;

		std::vector<std::string> v;
		for (int i = 0; i < 2000; i++)
			v.emplace_back(std::to_string(i) + std::string(40, 'x'));
		EXPECT(v[1999].compare(0, 4, "1999") == 0);

		std::vector<char> grow;
		for (int i = 0; i < (3 << 20); i += 4096)
			grow.resize(grow.size() + 4096, static_cast<char>(i));
		EXPECT(grow.size() == (3u << 20));
		auto u = std::make_unique<long[]>(1 << 18);
		EXPECT(u[12345] == 0);
	}
	bool threw = false;
	try {
		volatile size_t huge = static_cast<size_t>(-1) / 4;
		auto *p = new char[huge];
		delete[] p;
	} catch (const std::bad_alloc &) {
		threw = true;
	}
	EXPECT(threw);
	return failures ? 1 : 0;
}
