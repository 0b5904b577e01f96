/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The kernel types tailhunt's BPF programs read, written by hand. Every struct carries
 * preserve_access_index, so clang records a CO-RE relocation for each field access and libbpf
 * rewrites the offsets against the running kernel's BTF (/sys/kernel/btf/vmlinux) at load time:
 * only the fields listed here need to exist, in any order and at any offset. Array sizes and
 * enum values below are placeholders that relocations replace (bpf_core_enum_value).
 */
#ifndef TAILHUNT_VMLINUX_H
#define TAILHUNT_VMLINUX_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short int __s16;
typedef short unsigned int __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long int __s64;
typedef long long unsigned int __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s64 s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
	BPF_F_NO_PREALLOC = 1,
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};

struct kernfs_node {
	u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct cgroup_subsys_state {
	struct cgroup *cgroup;
} __attribute__((preserve_access_index));

enum cgroup_subsys_id {
	cpu_cgrp_id = 2,
};

struct css_set {
	struct cgroup_subsys_state *subsys[16];
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct task_struct {
	unsigned int flags;
	int pid;
	int tgid;
	char comm[16];
	struct css_set *cgroups;
} __attribute__((preserve_access_index));

#endif
