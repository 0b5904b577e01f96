// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Socket-option audit: who sets the options that change a TCP connection's behaviour.
 *
 * On entry to setsockopt(2), when the option is one of SO_SNDBUF, SO_RCVBUF (which switch
 * off buffer autotuning), their FORCE variants, SO_KEEPALIVE, TCP_NODELAY, TCP_QUICKACK or
 * TCP_WINDOW_CLAMP, one event goes to the ring buffer: pid, thread, command, the value passed,
 * and the socket's inode and peer (read through current->files->fdt->fd[fd]->private_data;
 * the peer is zero when the socket is not connected yet, as it usually is for SO_RCVBUF —
 * user space then finds the peer later by the inode).
 *
 * Two programs, one loaded: the syscalls:sys_enter_setsockopt tracepoint (needs tracefs to
 * attach), or a raw tracepoint on sys_enter filtered by the syscall number (x86_64 only;
 * needs no tracefs). No kprobes: they are compiled out of some kernels.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "setsockopt.h"

#define SOL_SOCKET 1
#define IPPROTO_TCP 6
#define SO_SNDBUF 7
#define SO_RCVBUF 8
#define SO_KEEPALIVE 9
#define SO_SNDBUFFORCE 32
#define SO_RCVBUFFORCE 33
#define TCP_NODELAY 1
#define TCP_WINDOW_CLAMP 10
#define TCP_QUICKACK 12
#define AF_INET 2
#define AF_INET6 10

const volatile u32 targ_tgid = 0;           /* only this process (0: all) */
const volatile long targ_setsockopt_nr = 54; /* __NR_setsockopt for the raw_tp fallback */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1024 * 1024);
} events SEC(".maps");

/* Events the ring buffer had no room for (user space was slower than the callers). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

/* The syscalls:sys_enter_setsockopt record: common header, syscall number, then the args. */
struct setsockopt_ctx {
	u64 common;
	long nr;
	long fd;
	long level;
	long optname;
	u64 optval;
	long optlen;
};

static __always_inline bool wanted(long level, long optname)
{
	if (level == SOL_SOCKET)
		return optname == SO_SNDBUF || optname == SO_RCVBUF || optname == SO_KEEPALIVE ||
		       optname == SO_SNDBUFFORCE || optname == SO_RCVBUFFORCE;
	if (level == IPPROTO_TCP)
		return optname == TCP_NODELAY || optname == TCP_QUICKACK || optname == TCP_WINDOW_CLAMP;
	return false;
}

static __always_inline int record(long fd, long level, long optname, u64 optval, long optlen)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	if (targ_tgid && tgid != targ_tgid)
		return 0;
	if (!wanted(level, optname))
		return 0;
	struct sockopt_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		u32 zero = 0;
		u64 *n = bpf_map_lookup_elem(&lost, &zero);
		if (n)
			__sync_fetch_and_add(n, 1);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = bpf_ktime_get_ns();
	e->tgid = tgid;
	e->tid = (u32)id;
	e->fd = fd;
	e->level = level;
	e->optname = optname;
	e->optlen = optlen;
	e->value = -1;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (optlen >= 4) {
		s32 v;
		if (bpf_probe_read_user(&v, sizeof(v), (void *)optval) == 0)
			e->value = v;
	}
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	unsigned int max_fds = BPF_CORE_READ(fdt, max_fds);
	if (fd >= 0 && fd < max_fds) {
		struct file **fds = BPF_CORE_READ(fdt, fd);
		struct file *f = NULL;
		bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
		if (f) {
			e->inode = BPF_CORE_READ(f, f_inode, i_ino);
			struct socket *sock = BPF_CORE_READ(f, private_data);
			struct sock *sk = BPF_CORE_READ(sock, sk);
			if (sk) {
				e->family = BPF_CORE_READ(sk, __sk_common.skc_family);
				e->dport = BPF_CORE_READ(sk, __sk_common.skc_dport);
				if (e->family == AF_INET)
					e->daddr = BPF_CORE_READ(sk, __sk_common.skc_daddr);
				else if (e->family == AF_INET6)
					BPF_CORE_READ_INTO(&e->daddr6, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
			}
		}
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_setsockopt")
int audit_setsockopt(struct setsockopt_ctx *ctx)
{
	return record(ctx->fd, ctx->level, ctx->optname, ctx->optval, ctx->optlen);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(audit_setsockopt_raw, struct pt_regs *regs, long nr)
{
	if (nr != targ_setsockopt_nr)
		return 0;
	return record(BPF_CORE_READ(regs, di), BPF_CORE_READ(regs, si), BPF_CORE_READ(regs, dx),
		      BPF_CORE_READ(regs, r10), BPF_CORE_READ(regs, r8));
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
