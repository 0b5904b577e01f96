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

#include "tailhunt_bpf_types.h"

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
