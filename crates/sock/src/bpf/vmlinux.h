/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The kernel types the setsockopt audit reads, written by hand. Every struct carries
 * preserve_access_index, so clang records a CO-RE relocation for each field access and libbpf
 * rewrites the offsets against the running kernel's BTF at load time: only the fields listed
 * here need to exist, in any order and at any offset.
 */
#ifndef TAILHUNT_SOCK_VMLINUX_H
#define TAILHUNT_SOCK_VMLINUX_H

#include "tailhunt_bpf_types.h"

struct inode {
	unsigned long i_ino;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
	void *private_data;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct task_struct {
	struct files_struct *files;
} __attribute__((preserve_access_index));

struct in6_addr {
	union {
		__u8 u6_addr8[16];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct socket {
	struct sock *sk;
} __attribute__((preserve_access_index));

/* x86_64 user registers at syscall entry (the raw_tp fallback reads the arguments here). */
struct pt_regs {
	unsigned long di;
	unsigned long si;
	unsigned long dx;
	unsigned long r10;
	unsigned long r8;
} __attribute__((preserve_access_index));

#endif
