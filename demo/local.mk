# SPDX-License-Identifier: MIT
# Build and test rules for the demo S3 stack (included from Makefile.am).
# The demo programs are not installed: generic names like storaged and loadgen
# do not belong in $(bindir); run them from the build tree.
# Three ordinary programs written the straightforward way (a fresh buffer
# per request, no pooling of their own): the shim's test subjects.

DEMO_COMMON = \
	demo/util.c demo/util.h \
	demo/http.c demo/http.h \
	demo/s3.c demo/s3.h \
	demo/s3ops.c demo/s3ops.h \
	demo/sigv4.c demo/sigv4.h
DEMO_CFLAGS = $(AM_CFLAGS) $(CRYPTO_CFLAGS) $(SANITIZER_CFLAGS)
DEMO_LDADD = $(CRYPTO_LIBS) $(HTTP_PARSER_LIBS)

noinst_PROGRAMS += demo/storaged
demo_storaged_SOURCES = demo/storaged.c demo/objstore.c demo/objstore.h \
	demo/server.c demo/server.h $(DEMO_COMMON)
demo_storaged_CFLAGS = $(DEMO_CFLAGS)
demo_storaged_LDADD = $(DEMO_LDADD)
demo_storaged_LDFLAGS = $(SANITIZER_CFLAGS)

noinst_PROGRAMS += demo/s3proxy
demo_s3proxy_SOURCES = demo/s3proxy.c demo/proxy.h demo/proxy_auth.c \
	demo/proxy_backend.c demo/server.c demo/server.h \
	demo/client.c demo/client.h $(DEMO_COMMON)
demo_s3proxy_CFLAGS = $(DEMO_CFLAGS)
demo_s3proxy_LDADD = $(DEMO_LDADD)
demo_s3proxy_LDFLAGS = $(SANITIZER_CFLAGS)

noinst_PROGRAMS += demo/loadgen
demo_loadgen_SOURCES = demo/loadgen.c demo/client.c demo/client.h $(DEMO_COMMON)
demo_loadgen_CFLAGS = $(DEMO_CFLAGS)
demo_loadgen_LDADD = $(DEMO_LDADD) -lm
demo_loadgen_LDFLAGS = $(SANITIZER_CFLAGS)

# ---------------------------------------------------------------------------
# Tests: each starts two storaged nodes and an s3proxy on ephemeral loopback
# ports and stops them whatever happens.
# ---------------------------------------------------------------------------
TESTS += tests/demo/stack.sh tests/demo/s3cmd.sh tests/demo/abuse.sh tests/demo/crash.sh \
	tests/demo/resign.sh tests/demo/s3compat.sh tests/demo/s3edges.sh
EXTRA_DIST += tests/demo/resign.sh tests/demo/lib.sh tests/demo/stack.sh tests/demo/s3cmd.sh \
	tests/demo/abuse.sh tests/demo/s3req.py tests/demo/rawhttp.py \
	tests/demo/listing.py tests/demo/crash.sh tests/demo/s3compat.sh tests/demo/s3compat.py \
	tests/demo/s3edges.sh tests/demo/s3edges.py

# Hostile conditions: idle connections past the proxy's descriptor limit
# (~20 s), a node killed twice under load with everything under the shim
# (SOAK_SECONDS, default 45; ~75 s), and memcheck over the three programs
# (~25 s; skipped without valgrind).
TESTS += tests/demo/idle.sh tests/demo/soak.sh tests/demo/valgrind.sh
EXTRA_DIST += tests/demo/idle.sh tests/demo/idle.py tests/demo/soak.sh tests/demo/valgrind.sh

# A one-node Ceph cluster with radosgw under the shim, and s3proxy in front
# of it (scripts/rgw; ~40 s, Ceph packages installed on demand as root).
TESTS += tests/demo/rgw.sh
EXTRA_DIST += tests/demo/rgw.sh scripts/rgw

# ---------------------------------------------------------------------------
# Fuzz targets (libFuzzer): the request parser, SigV4, the list/XML
# parameter parsers, the aws-chunked decoder and the Range parser (plus the
# object semantics of s3ops.c over each fuzzed request), linked
# against the same sources as the programs.  Built with clang whatever CC
# is, so they are plain rules listed in check_SCRIPTS (built before the
# tests run) rather than automake programs.
# ---------------------------------------------------------------------------
DEMO_FUZZ_LIBSRC = $(top_srcdir)/demo/util.c $(top_srcdir)/demo/http.c \
	$(top_srcdir)/demo/s3.c $(top_srcdir)/demo/s3ops.c $(top_srcdir)/demo/sigv4.c
DEMO_FUZZ_HDRS = $(top_srcdir)/demo/util.h $(top_srcdir)/demo/http.h \
	$(top_srcdir)/demo/s3.h $(top_srcdir)/demo/s3ops.h $(top_srcdir)/demo/sigv4.h
DEMO_FUZZ_FLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer \
	-Wall -Wextra -Wno-unused-parameter -Wno-deprecated-declarations \
	-I$(top_srcdir)/demo $(CRYPTO_CFLAGS)
DEMO_FUZZERS = tests/demo/fuzz/fuzz_request tests/demo/fuzz/fuzz_sigv4 \
	tests/demo/fuzz/fuzz_listparams tests/demo/fuzz/fuzz_chunked \
	tests/demo/fuzz/fuzz_range
DEMO_FUZZ_SRC = tests/demo/fuzz/fuzz_request.c tests/demo/fuzz/fuzz_sigv4.c \
	tests/demo/fuzz/fuzz_listparams.c tests/demo/fuzz/fuzz_chunked.c \
	tests/demo/fuzz/fuzz_range.c
if HAVE_CLANG
check_SCRIPTS = $(DEMO_FUZZERS)
endif
# One rule for every target: each is its own .c ($(@F).c) with the demo's
# parsers; a change to any fuzzer's source rebuilds all five (seconds).
$(DEMO_FUZZERS): $(DEMO_FUZZ_SRC) $(DEMO_FUZZ_LIBSRC) $(DEMO_FUZZ_HDRS)
	$(AM_V_GEN)mkdir -p tests/demo/fuzz && \
	clang $(DEMO_FUZZ_FLAGS) -o $@ $(top_srcdir)/tests/demo/fuzz/$(@F).c \
	$(DEMO_FUZZ_LIBSRC) $(CRYPTO_LIBS) $(HTTP_PARSER_LIBS)
CLEANFILES += $(DEMO_FUZZERS)
TESTS += tests/demo/fuzz.sh
EXTRA_DIST += tests/demo/fuzz.sh $(DEMO_FUZZ_SRC) tests/demo/fuzz/seeds
