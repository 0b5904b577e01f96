/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* Types shared by setsockopt.bpf.c and src/audit/event.rs (which decodes them). */
#ifndef TAILHUNT_SETSOCKOPT_H
#define TAILHUNT_SETSOCKOPT_H

#define TASK_COMM_LEN 16

/* One setsockopt call of interest, 88 bytes, native byte order except addresses and dport. */
struct sockopt_event {
	u64 ts_ns;        /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
	u64 inode;        /* the socket's inode (socket:[inode] in /proc/PID/fd), 0 if unknown */
	u32 tgid;         /* process id */
	u32 tid;          /* thread id */
	s32 fd;
	s32 level;        /* SOL_SOCKET = 1, IPPROTO_TCP = 6 */
	s32 optname;
	s32 optlen;
	s64 value;        /* the int the caller passed; -1 when optlen < 4 or unreadable */
	u16 family;       /* AF_INET = 2, AF_INET6 = 10, 0 if the socket was not readable */
	u16 dport;        /* network byte order; 0 when not connected yet */
	u32 daddr;        /* IPv4 peer, network byte order */
	u8 daddr6[16];    /* IPv6 peer */
	char comm[TASK_COMM_LEN];
};

#endif
