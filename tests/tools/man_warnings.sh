#!/bin/sh
# SPDX-License-Identifier: MIT
# The manual pages format without a troff warning at man's usual 78
# columns (issue 37: "can't break line" in poolshim.1's --csv header).
. "$PS_TOP_SRCDIR/tests/lib.sh"
command -v groff >/dev/null || skip "groff (Debian package groff-base) not installed"
for page in "$PS_TOP_SRCDIR"/man/*.[1-8]; do
	name=$(basename "$page")
	groff -man -Tutf8 -ww -z -rLL=78n "$page" >"$PST_TMP/$name.err" 2>&1
	[ ! -s "$PST_TMP/$name.err" ] && pass "$name: no warning" ||
		fail "$name: $(head -3 "$PST_TMP/$name.err")"
done
finish
