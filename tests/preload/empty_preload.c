// SPDX-License-Identifier: MIT
/*
 * A preloaded library that does nothing, for startup_syscalls.sh: what the
 * dynamic loader's mapping of any preloaded library costs a process (some
 * nine system calls), measured beside the shim's.
 */
int ps_empty_preload_marker;
