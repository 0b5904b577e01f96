/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Types shared by runq.bpf.c and the Rust loader (crates/sched/src/snapshot.rs reads them
 * field for field; a test there checks the sizes against the generated skeleton's).
 *
 * Histogram bucket layout: the one in crates/histogram (Layout::index) with SUB_BITS = 4:
 * 16 buckets per power of two, each at most 1/16 = 6.25% wide, values below 16 ns exact.
 * A value v >= 16 with highest set bit h lands in bucket ((h - 4) << 4) + (v >> (h - 4)).
 * 976 buckets cover every u64, so no value is clamped.
 */
#ifndef TAILHUNT_RUNQ_H
#define TAILHUNT_RUNQ_H

#define RUNQ_SUB_BITS 4
#define RUNQ_BUCKETS ((65 - RUNQ_SUB_BITS) << RUNQ_SUB_BITS)
#define RUNQ_COMM_LEN 16

/* How many other cgroups a cgroup's histogram entry tracks inline; more go to the pairs map. */
#define RUNQ_OTHERS 8

/*
 * How far back each CPU remembers who ran on it: its last RUNQ_SEGMENTS stretches of one
 * cgroup each (a power of two). A wait that reaches back further has its older part charged to
 * RUNQ_UNATTRIBUTED.
 */
#define RUNQ_SEGMENTS 64
/* The other "cgroup" of the part of a wait older than its CPU's remembered history. */
#define RUNQ_UNATTRIBUTED ((__u64)-2)
/* Cgroups one wait's charges are gathered for before they are written (more: written as met). */
#define RUNQ_GATHER 6

/* One stretch of a CPU's time during which tasks of one cgroup ran (0: the idle task). */
struct runq_segment {
	__u64 start_ns;
	__u64 cgroup;
};

/* A CPU's recent history: segment i is seg[i % RUNQ_SEGMENTS]; `head` counts every segment
 * started, so the newest is head - 1, and it lasts until now. The gather_* arrays are scratch
 * space for the wait being charged (in the map rather than on the stack: the verifier then
 * does not follow each slot's contents through every step of the walk). */
struct runq_timeline {
	__u64 head;
	struct runq_segment seg[RUNQ_SEGMENTS];
	__u64 gather_cg[RUNQ_GATHER];
	__u64 gather_ns[RUNQ_GATHER];
};

/* Another cgroup's part in this one's waits and preemptions (cumulative). */
struct runq_other {
	__u64 key;          /* the other cgroup's id + 1 (so the idle task's 0 is 1); 0 = free slot */
	__u64 preemptions;
	__u64 waits;        /* waits during which it ran on the waiter's CPU */
	__u64 wait_ns;      /* the time it ran during them */
};

/* Per-cgroup run-queue latency histogram: cumulative since load (user space takes deltas). */
struct runq_hist {
	__u64 slots[RUNQ_BUCKETS];
	/* (No count: user space sums the slots, saving an atomic add per wait.) */
	__u64 sum_ns;
	/* The v1 cpu controller's cgroup of the first task counted (0 without one). */
	__u64 cpu_cgroup_id;
	/* Time its tasks ran, all CPUs, counted when a CPU's running cgroup changes (so a CPU's
	 * current stretch is not in it yet: user space adds it from the timelines). */
	__u64 run_ns;
	/* The first RUNQ_OTHERS other cgroups it waited behind or was preempted by: kept here so
	 * the common case costs no second hash lookup. */
	struct runq_other others[RUNQ_OTHERS];
};

/* Who a cgroup's tasks lost the CPU to, or waited behind, beyond its RUNQ_OTHERS inline slots. */
struct runq_pair_key {
	__u64 victim_cgroup;
	/* The other task's cgroup; 0 = the idle task (the CPU was idle, or the victim's group
	 * was throttled and nothing else was runnable). */
	__u64 other_cgroup;
};

struct runq_pair {
	/* Involuntary switches: a victim task still runnable was switched out for the other. */
	__u64 preemptions;
	/* Waits of the victim during which the other ran on its CPU, and how long it ran. */
	__u64 waits;
	__u64 wait_ns;
};

/* One run-queue wait, sent through the ring buffer (outliers, or every one with targ_all_events). */
struct runq_event {
	__u64 switch_ns;   /* bpf_ktime_get_ns (CLOCK_MONOTONIC) when the task got the CPU */
	__u64 latency_ns;  /* since it became runnable */
	__u64 cgroup_id;
	__u64 prev_cgroup_id;
	__u32 pid;
	__u32 tgid;
	__u32 prev_pid;
	__u32 cpu;
	char comm[RUNQ_COMM_LEN];
	char prev_comm[RUNQ_COMM_LEN];
};

/* Indexes into the per-CPU counters map. */
enum runq_counter {
	RUNQ_EMITTED = 0,       /* events written to the ring buffer */
	RUNQ_RB_DROPPED = 1,    /* events lost: ring buffer full */
	RUNQ_RATE_LIMITED = 2,  /* outliers not sent: over the per-cgroup, per-CPU budget */
	RUNQ_HIST_FULL = 3,     /* waits not counted: the cgroup map was full */
	RUNQ_PAIR_FULL = 4,     /* attributions not counted: the pair map was full */
	RUNQ_TS_FULL = 5,       /* wakeups not timed: the timestamp store was full */
	RUNQ_BEYOND_HISTORY = 6, /* waits reaching back past their CPU's remembered history */
	RUNQ_NR_COUNTERS = 7,
};

/* Where the wakeup timestamp of a task waits for its switch-in. */
enum runq_store {
	RUNQ_STORE_TASK = 0,   /* BPF task storage (tp_btf only) */
	RUNQ_STORE_ARRAY = 1,  /* an array indexed by pid, pid_max entries */
	RUNQ_STORE_HASH = 2,   /* a hash keyed by pid */
};

/* Which cgroup a wait is charged to. */
enum runq_hierarchy {
	RUNQ_CGROUP_V2 = 0,      /* task->cgroups->dfl_cgrp (cgroup2) */
	RUNQ_CGROUP_V1_CPU = 1,  /* the v1 cpu controller's cgroup */
};

#endif
