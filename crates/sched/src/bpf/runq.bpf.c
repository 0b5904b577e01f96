// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Run-queue latency per cgroup, with who took the CPU.
 *
 * A task's wait starts when it becomes runnable (sched_wakeup, sched_wakeup_new, or being
 * switched out while still runnable: preempted) and ends when sched_switch puts it on a CPU.
 * Each wait is charged to the cgroup of the task that waited — read from the task in the
 * tracepoint's arguments, never from `current` — into a log-linear histogram with the bucket
 * layout of crates/histogram (runq.h). Its time is also split among the cgroups that ran on
 * that CPU while it waited, in proportion to how long each ran: every CPU keeps its recent
 * history (which cgroup ran from when: a new segment whenever the running cgroup changes), and
 * the switch that ends a wait walks it back to the wakeup. (Charging the whole wait to the task
 * that ran just before would blame a task that merely sits in every hand-over: a 1 kHz sleeper
 * between CPU hogs.) Each involuntary switch is counted apart, for the pair (preempted cgroup,
 * preempting cgroup).
 *
 * Every program exists twice: tp_btf (direct, BTF-checked reads) and a raw_tp fallback
 * (BPF_CORE_READ through bpf_probe_read_kernel); the loader picks one set. Filters and
 * options are `const volatile targ_*` set before load, so the verifier prunes what is off.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "runq.h"

#define PF_KTHREAD 0x00200000
#define TASK_RUNNING 0

const volatile u32 targ_store = RUNQ_STORE_ARRAY;
const volatile u32 targ_hierarchy = RUNQ_CGROUP_V2;
const volatile bool targ_v1_cpu = false;       /* also note each cgroup's v1 cpu cgroup */
const volatile bool targ_skip_kthreads = true; /* kernel threads' own waits are not wanted */
const volatile bool targ_filter = false;       /* only cgroups in cgroup_filter */
const volatile bool targ_all_events = false;   /* every wait to the ring buffer (validation) */
const volatile u64 targ_outlier_ns = 1000000;  /* waits this long go to the ring buffer */
const volatile u64 targ_budget_gap_ns = 20000000; /* one outlier token per gap, per cgroup per CPU */
const volatile u32 targ_budget_burst = 8;

/*
 * Wakeup timestamps: one of three stores (targ_store); the others are shrunk to one entry.
 * Measured here (bench/runq.sh: 2 vCPU VM, kernel 6.18, kernel BPF statistics, mean ns per hook
 * over the three programs, perf bench sched pipe / messaging): array by pid 168 / 222, task
 * storage 177 / 313, hash by pid 297 / 392. The array is the default; see TimestampStore in
 * src/config.rs for the trade-off.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u64);
} start_task SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* pid_max, set by the loader */
	__type(key, u32);
	__type(value, u64);
} start_array SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* set by the loader */
	__type(key, u32);
	__type(value, u64);
} start_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024); /* --max-cgroups */
	__type(key, u64);
	__type(value, struct runq_hist);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct runq_pair_key);
	__type(value, struct runq_pair);
} pairs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u64);
	__type(value, u8);
} cgroup_filter SEC(".maps");

/* Each CPU's recent history of which cgroup ran (runq.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct runq_timeline);
} timelines SEC(".maps");

struct runq_budget {
	u64 last_ns;
	u64 tokens;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, u64);
	__type(value, struct runq_budget);
} budgets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RUNQ_NR_COUNTERS);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

/* A zeroed histogram to insert: too big for the 512-byte stack. */
struct runq_hist empty_hist = {};
/* Never written: it puts struct runq_event into the skeleton's generated types, so a Rust unit
 * test can check its size against the decoder's. */
struct runq_event unused_event_layout = {};
/* Likewise for the timelines that user space reads. */
struct runq_timeline unused_timeline_layout = {};

/* Field reads: direct for tp_btf (the verifier knows the types), probe reads for raw_tp.
 * `btf` is a literal at every call site, so clang keeps one arm. */
#define READ(btf, p, field) ((btf) ? (p)->field : BPF_CORE_READ(p, field))

static __always_inline void count(u32 counter)
{
	u64 *c = bpf_map_lookup_elem(&counters, &counter);
	if (c)
		*c += 1;
}

static __always_inline u64 cgroup_v2(struct task_struct *p, const bool btf)
{
	if (btf)
		return p->cgroups->dfl_cgrp->kn->id;
	return BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
}

static __always_inline u64 cgroup_v1_cpu(struct task_struct *p, const bool btf)
{
	if (!bpf_core_enum_value_exists(enum cgroup_subsys_id, cpu_cgrp_id))
		return 0;
	int id = bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id);
	if (id < 0 || id >= 16)
		return 0;
	if (btf) {
		struct cgroup_subsys_state *css = p->cgroups->subsys[id];
		return css ? css->cgroup->kn->id : 0;
	}
	struct cgroup_subsys_state *css = BPF_CORE_READ(p, cgroups, subsys[id]);
	return css ? BPF_CORE_READ(css, cgroup, kn, id) : 0;
}

static __always_inline u64 task_cgroup(struct task_struct *p, const bool btf)
{
	if (targ_hierarchy == RUNQ_CGROUP_V1_CPU)
		return cgroup_v1_cpu(p, btf);
	return cgroup_v2(p, btf);
}

/* Whether a task's own waits are wanted. */
static __always_inline bool wanted(struct task_struct *p, u64 cg, const bool btf)
{
	if (targ_skip_kthreads && (READ(btf, p, flags) & PF_KTHREAD))
		return false;
	if (targ_filter && !bpf_map_lookup_elem(&cgroup_filter, &cg))
		return false;
	return true;
}

static __always_inline void store_ts(struct task_struct *p, u32 pid, u64 now, const bool btf)
{
	if (btf && targ_store == RUNQ_STORE_TASK) {
		u64 *ts = bpf_task_storage_get(&start_task, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (ts)
			*ts = now;
		else
			count(RUNQ_TS_FULL);
	} else if (targ_store == RUNQ_STORE_ARRAY) {
		u64 *ts = bpf_map_lookup_elem(&start_array, &pid);
		if (ts)
			*ts = now;
		else
			count(RUNQ_TS_FULL);
	} else {
		if (bpf_map_update_elem(&start_hash, &pid, &now, BPF_ANY))
			count(RUNQ_TS_FULL);
	}
}

/* The wakeup time of a task about to run, cleared; 0 when it was not timed. */
static __always_inline u64 take_ts(struct task_struct *p, u32 pid, const bool btf)
{
	u64 ts = 0;
	if (btf && targ_store == RUNQ_STORE_TASK) {
		u64 *t = bpf_task_storage_get(&start_task, p, 0, 0);
		if (t) {
			ts = *t;
			*t = 0;
		}
	} else if (targ_store == RUNQ_STORE_ARRAY) {
		u64 *t = bpf_map_lookup_elem(&start_array, &pid);
		if (t) {
			ts = *t;
			*t = 0;
		}
	} else {
		u64 *t = bpf_map_lookup_elem(&start_hash, &pid);
		if (t) {
			ts = *t;
			bpf_map_delete_elem(&start_hash, &pid);
		}
	}
	return ts;
}

/* Highest set bit, by binary search (no loop for the verifier to bound). */
static __always_inline u32 log2_u64(u64 v)
{
	u32 r = 0, s;
	s = (v > 0xFFFFFFFFULL) << 5; v >>= s; r |= s;
	s = (v > 0xFFFF) << 4; v >>= s; r |= s;
	s = (v > 0xFF) << 3; v >>= s; r |= s;
	s = (v > 0xF) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	return r | (u32)(v >> 1);
}

/* crates/histogram Layout::index with SUB_BITS = RUNQ_SUB_BITS. */
static __always_inline u32 bucket_index(u64 v)
{
	if (v < (1ULL << RUNQ_SUB_BITS))
		return (u32)v;
	u32 e = log2_u64(v) - RUNQ_SUB_BITS;
	return (e << RUNQ_SUB_BITS) + (u32)(v >> e);
}

/* The histogram entry of cgroup `cg`, created on first use; NULL when the map is full. */
static __always_inline struct runq_hist *hist_of(u64 cg, struct task_struct *p, const bool btf)
{
	struct runq_hist *h = bpf_map_lookup_elem(&hists, &cg);
	if (h)
		return h;
	if (bpf_map_update_elem(&hists, &cg, &empty_hist, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&hists, &cg)) {
		count(RUNQ_HIST_FULL);
		return NULL;
	}
	h = bpf_map_lookup_elem(&hists, &cg);
	if (h && targ_v1_cpu)
		h->cpu_cgroup_id = cgroup_v1_cpu(p, btf);
	return h;
}

static __always_inline void record_wait(struct runq_hist *h, u64 delta)
{
	u64 i = bucket_index(delta);
	/* Keep clang from checking a copy of i that the verifier does not track. */
	barrier_var(i);
	if (i >= RUNQ_BUCKETS)
		return;
	__sync_fetch_and_add(&h->slots[i], 1);
	__sync_fetch_and_add(&h->sum_ns, delta);
}

/* Overflow: the (victim, other) pair in the pairs map. */
static __always_inline void record_pair(u64 victim, u64 other, bool preempted, u64 wait_ns)
{
	struct runq_pair_key key = { .victim_cgroup = victim, .other_cgroup = other };
	struct runq_pair *v = bpf_map_lookup_elem(&pairs, &key);
	if (!v) {
		struct runq_pair zero = {};
		if (bpf_map_update_elem(&pairs, &key, &zero, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&pairs, &key)) {
			count(RUNQ_PAIR_FULL);
			return;
		}
		v = bpf_map_lookup_elem(&pairs, &key);
		if (!v)
			return;
	}
	if (preempted) {
		__sync_fetch_and_add(&v->preemptions, 1);
	} else {
		__sync_fetch_and_add(&v->waits, 1);
		__sync_fetch_and_add(&v->wait_ns, wait_ns);
	}
}

/* Charges a preemption (or a wait of wait_ns) of cgroup `victim`, whose entry is h, to the other
 * cgroup: in one of h's inline slots (claimed with a compare-and-swap, so two CPUs never take
 * the same one for different cgroups), else in the pairs map. */
static __always_inline void record_other(struct runq_hist *h, u64 victim, u64 other,
					 bool preempted, u64 wait_ns)
{
	u64 key = other + 1;
#pragma unroll
	for (int i = 0; i < RUNQ_OTHERS; i++) {
		struct runq_other *o = &h->others[i];
		u64 k = o->key;
		if (k == 0) {
			k = __sync_val_compare_and_swap(&o->key, 0, key);
			if (k == 0)
				k = key;
		}
		if (k == key) {
			if (preempted) {
				__sync_fetch_and_add(&o->preemptions, 1);
			} else {
				__sync_fetch_and_add(&o->waits, 1);
				__sync_fetch_and_add(&o->wait_ns, wait_ns);
			}
			return;
		}
	}
	record_pair(victim, other, preempted, wait_ns);
}

/* Token bucket per cgroup on this CPU: targ_budget_burst tokens, one back per gap. */
static __always_inline bool take_token(u64 cg, u64 now)
{
	struct runq_budget *b = bpf_map_lookup_elem(&budgets, &cg);
	if (!b) {
		struct runq_budget fresh = { .last_ns = now, .tokens = targ_budget_burst };
		bpf_map_update_elem(&budgets, &cg, &fresh, BPF_ANY);
		b = bpf_map_lookup_elem(&budgets, &cg);
		if (!b)
			return false;
	}
	u64 gap = targ_budget_gap_ns ? targ_budget_gap_ns : 1;
	u64 earned = (now - b->last_ns) / gap;
	if (earned) {
		b->tokens += earned;
		if (b->tokens > targ_budget_burst)
			b->tokens = targ_budget_burst;
		b->last_ns += earned * gap;
	}
	if (!b->tokens)
		return false;
	b->tokens -= 1;
	return true;
}

static __always_inline void emit(u64 now, u64 delta, u64 cg, u64 prev_cg, struct task_struct *next,
				 struct task_struct *prev, const bool btf)
{
	if (!targ_all_events) {
		if (delta < targ_outlier_ns)
			return;
		if (!take_token(cg, now)) {
			count(RUNQ_RATE_LIMITED);
			return;
		}
	}
	struct runq_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(RUNQ_RB_DROPPED);
		return;
	}
	e->switch_ns = now;
	e->latency_ns = delta;
	e->cgroup_id = cg;
	e->prev_cgroup_id = prev_cg;
	e->pid = READ(btf, next, pid);
	e->tgid = READ(btf, next, tgid);
	e->prev_pid = READ(btf, prev, pid);
	e->cpu = bpf_get_smp_processor_id();
	BPF_CORE_READ_STR_INTO(&e->comm, next, comm);
	BPF_CORE_READ_STR_INTO(&e->prev_comm, prev, comm);
	bpf_ringbuf_submit(e, 0);
	count(RUNQ_EMITTED);
}

static __always_inline int on_wakeup(struct task_struct *p, const bool btf)
{
	u32 pid = READ(btf, p, pid);
	if (!pid)
		return 0;
	if (targ_skip_kthreads && (READ(btf, p, flags) & PF_KTHREAD))
		return 0;
	if (targ_filter) {
		u64 cg = task_cgroup(p, btf);
		if (!bpf_map_lookup_elem(&cgroup_filter, &cg))
			return 0;
	}
	store_ts(p, pid, bpf_ktime_get_ns(), btf);
	return 0;
}

/* Overflow of gather(): charged as met (a noinline subprogram keeps the walk's loop small). */
static __noinline void charge_now(struct runq_hist *h, u64 victim, u64 other, u64 ns)
{
	if (h)
		record_other(h, victim, other, false, ns);
}

/* The time a wait spent behind one cgroup, added to the wait's gathered charges. */
static __always_inline void gather(struct runq_timeline *tl, struct runq_hist *h, u64 victim,
				   u64 other, u64 t)
{
#pragma unroll
	for (int k = 0; k < RUNQ_GATHER; k++) {
		if (tl->gather_ns[k] && tl->gather_cg[k] == other) {
			tl->gather_ns[k] += t;
			return;
		}
		if (!tl->gather_ns[k]) {
			tl->gather_cg[k] = other;
			tl->gather_ns[k] = t;
			return;
		}
	}
	charge_now(h, victim, other, t);
}

/*
 * Splits a wait [ts, now) of cgroup `victim` (histogram entry h) among the cgroups that ran on
 * this CPU meanwhile: the timeline's segments from the newest back to the one in which the wait
 * began. The walk costs one step per change of running cgroup during the wait (one, usually).
 */
static __always_inline void charge_wait(struct runq_hist *h, u64 victim,
					struct runq_timeline *tl, u64 head, u64 ts, u64 now)
{
	u64 end = now;
#pragma unroll
	for (int k = 0; k < RUNQ_GATHER; k++)
		tl->gather_ns[k] = 0;
	bool whole = false;
#pragma clang loop unroll(disable)
	for (u32 i = 0; i < RUNQ_SEGMENTS; i++) {
		if (i >= head)
			break;
		struct runq_segment *sg = &tl->seg[(head - 1 - i) & (RUNQ_SEGMENTS - 1)];
		u64 start = sg->start_ns;
		u64 from = start > ts ? start : ts;
		if (end > from)
			gather(tl, h, victim, sg->cgroup, end - from);
		if (start <= ts) {
			whole = true;
			break;
		}
		end = start;
	}
	if (!whole && end > ts) {
		gather(tl, h, victim, RUNQ_UNATTRIBUTED, end - ts);
		count(RUNQ_BEYOND_HISTORY);
	}
#pragma unroll
	for (int k = 0; k < RUNQ_GATHER; k++) {
		if (tl->gather_ns[k])
			record_other(h, victim, tl->gather_cg[k], false, tl->gather_ns[k]);
	}
}

static __always_inline int on_switch(bool preempt, struct task_struct *prev,
				     struct task_struct *next, unsigned int prev_state,
				     const bool btf)
{
	u64 now = bpf_ktime_get_ns();
	u32 zero = 0;
	struct runq_timeline *tl = bpf_map_lookup_elem(&timelines, &zero);
	if (!tl)
		return 0;
	u32 prev_pid = READ(btf, prev, pid);
	u32 next_pid = READ(btf, next, pid);
	u64 head = tl->head;
	struct runq_segment *cur = head ? &tl->seg[(head - 1) & (RUNQ_SEGMENTS - 1)] : NULL;
	/* The idle task's "cgroup" is 0: it belongs to no container. The task switched out is the
	 * one this CPU's newest segment began with (or one of its cgroup), so its cgroup is known
	 * without the four dependent loads of reading it. */
	u64 prev_cg = 0, next_cg = 0;
	if (prev_pid && cur) {
		prev_cg = cur->cgroup;
		/* Keeps clang from merging this load with the task's, which the verifier refuses
		 * (one instruction, two kinds of pointer). */
		barrier_var(prev_cg);
	} else if (prev_pid) {
		prev_cg = task_cgroup(prev, btf);
	}
	if (next_pid)
		next_cg = task_cgroup(next, btf);

	/* Still runnable when switched out: preempted (or yielded); its next wait starts now. */
	if (prev_pid && (preempt || prev_state == TASK_RUNNING) && wanted(prev, prev_cg, btf)) {
		store_ts(prev, prev_pid, now, btf);
		struct runq_hist *ph = hist_of(prev_cg, prev, btf);
		if (ph)
			record_other(ph, prev_cg, next_cg, true, 0);
	}
	if (next_pid) {
		u64 ts = take_ts(next, next_pid, btf);
		if (ts && now >= ts) {
			u64 delta = now - ts;
			struct runq_hist *h = hist_of(next_cg, next, btf);
			if (h) {
				record_wait(h, delta);
				charge_wait(h, next_cg, tl, head, ts, now);
			}
			emit(now, delta, next_cg, prev_cg, next, prev, btf);
		}
	}
	/* The CPU's history: a new segment when the running cgroup changes. The one that ends is
	 * added to its cgroup's run time (its activity, whoever waited). */
	if (!cur || cur->cgroup != next_cg) {
		if (cur && cur->cgroup && now > cur->start_ns) {
			struct runq_hist *rh = hist_of(cur->cgroup, prev, btf);
			if (rh)
				__sync_fetch_and_add(&rh->run_ns, now - cur->start_ns);
		}
		struct runq_segment *sg = &tl->seg[head & (RUNQ_SEGMENTS - 1)];
		sg->start_ns = now;
		sg->cgroup = next_cg;
		tl->head = head + 1;
	}
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(runq_wakeup, struct task_struct *p)
{
	return on_wakeup(p, true);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(runq_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p, true);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(runq_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return on_switch(preempt, prev, next, prev_state, true);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(runq_wakeup_raw, struct task_struct *p)
{
	return on_wakeup(p, false);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(runq_wakeup_new_raw, struct task_struct *p)
{
	return on_wakeup(p, false);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(runq_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return on_switch(preempt, prev, next, prev_state, false);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
