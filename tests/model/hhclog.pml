/* hhclog.pml: a Promela model of the HHC barrier-log durability
 * protocol (docs/design.md §4, §5 and §7), checked by spin from
 * `make check` (tests/model/check-model.sh).  README.md in this
 * directory maps every process and variable to the C code.
 *
 * Scope, small enough for an exhaustive search: NLBA blocks; two
 * clients (the second one only FLUSHes unless ALL2) sharing MAXOPS
 * operations (write, FUA write, trim, FLUSH) over up to MAXRUNS runs;
 * one cache slot per block; NBUF in-memory segment buffers of SEGCAP
 * entries; a circular log region of NPOS segment positions on NMIR
 * mirrors; the log writer; the flusher; a crash at any step (every
 * unsynced write to the SSD, the backend and each mirror kept or lost
 * on its own); loss of the SSD; loss of a mirror; restart on the intact
 * SSD; replay from the log when the SSD is lost.  A FLUSH that finds no
 * current buffer (no room for one, or the pool exhausted) takes a
 * ticket without one, and the writer may write an emergency barrier
 * (make_room) then.
 *
 * Contents are event numbers: event k of block x is its k-th write or
 * trim (0 = the backend's initial data); a write's data is its event
 * number; TZ is what a trimmed block reads from the backend (zeros).
 *
 * Every process is a loop of guarded atomic steps over global state, so
 * a crash is one atomic step of init that forgets the RAM state: the
 * states after a crash do not depend on where the processes were.
 *
 * Deliberate bugs are selected with -DMUT_...; -DFLAW_... puts back a
 * flaw of the protocol as it was first specified, or (FLAW_EMERG_NOREV)
 * of log.c without commit 05cba10 (README.md); run-mutants checks that
 * spin finds a counterexample for each.
 *
 * -DWAL: the log as a write-ahead log (docs/design.md §5.8; README.md "The write-ahead variant").
 * A FLUSH waits for the log barrier only (no cache_commit; with no
 * healthy mirror it commits, then writes back); the SSD is committed
 * at checkpoints: before the persisted head moves (the head goes no
 * further than the in-memory head when the checkpoint began) and once
 * when the last mirror fails; the flusher commits before its backend
 * writes, a trim before its passdown.  A restart on the intact SSD
 * first redoes the log (head to last barrier, as replay reads it) into
 * the cache: the LBA's slot, else a free slot, else the backend; then
 * commits.  FLAW_WAL_... and MUT_WAL_... break one of those rules;
 * WAL_DROP (the redo drops revoked blocks, the flusher does not
 * commit), WAL_ANYCKPT, WAL_CKPT_CONCURRENT, WAL_LOSTWINDOW and
 * WAL_FAIL_IN_REDO vary it (README.md).
 *
 * -DHEAL (issue 27, fix 8): a failed mirror keeps on disk the chain it
 * had (stale once FLUSHes fall back to write-back) and may work again
 * while the gateway runs; it is voided (reads as blank) as soon as a
 * write to it succeeds; a crash that loses the SSD replays a healthy
 * mirror or, if none is, one that works again and is not voided.  A
 * run without a crash ends with a close, after which the SSD may be
 * lost.  FLAW_NO_VOID, MUT_VOID_AT_CLOSE and MUT_VOID_AT_FLUSH break
 * the rule; HEAL_LATE lets a mirror work again after the crash (the gap
 * that remains).
 *
 * -DBFAIL (issue 27, fixes 9 and 10): a backend flush may fail
 * (MAXBFAIL times), and the backend then drops the writes it had not
 * made durable; a failure while a passdown (trim) may be unflushed
 * makes every later FLUSH fail (sticky); a write-back stays dirty if
 * any backend flush failed since its write.  FLAW_BFLUSH_RETRY,
 * MUT_FLUSHER_FAIL_SILENT and FLAW_WB_OTHER_FAIL break them.
 *
 * -DINFLIGHT=K (issue 32, K = 2 or 3): pipelined barriers.  The writer
 * goes on writing while up to K barrier segments are written and not
 * yet durable; each one's sync (or FUA write) completes on each mirror
 * on its own, in any order; durable_barrier advances only over the
 * oldest ones done on every healthy mirror (the contiguous prefix).
 * MUT_ACK_OUT_OF_ORDER, MUT_RELEASE_INFLIGHT and
 * MUT_NOTHING_NEW_INFLIGHT break that; MUT_REPLAY_PAST_HOLE (any K)
 * lets the chain walk step over an invalid record.
 */

#define NLBA 2
#ifndef NPOS
#define NPOS 3          /* segment positions in the circular log region */
#endif
#define SEGCAP 1        /* entries per segment buffer */
#define NMIR 2          /* log mirrors */
#define NCLIENT 2
#ifndef ALL2
#define ALL2 0          /* 1: the second client issues every operation */
#endif
#ifndef NBUF
#define NBUF 2          /* in-memory segment buffers (the pipeline) */
#endif
#ifndef MAXOPS
#define MAXOPS 3        /* client operations, all runs together */
#endif
#ifndef MAXRUNS
#define MAXRUNS 2       /* runs: a crash with the SSD intact restarts */
#endif
#ifndef MAXFAIL
#define MAXFAIL 0       /* mirrors that may fail while running */
#endif
#ifndef MAXWB
#define MAXWB 1         /* write-backs per run (more while the log is full) */
#endif
#ifndef MAXRECLAIM
#define MAXRECLAIM 1    /* active reclaims per run */
#endif
#define RECLAIM_FREE 1  /* active reclaim when free positions <= this */

#define NONE 255
#ifdef WAL_DROP
#define RVK 254         /* WAL_DROP: a revoke in the redo map */
#else
#define RVK NONE
#endif
#define TZ 15           /* a trimmed block on the backend (zeros) */

/* cache slot states (C: enum slot_state) */
#define S_FREE 0
#define S_CLEAN 1
#define S_DIRTY 2

/* segment buffer states */
#define B_FREE 0
#define B_CUR 1
#define B_SEALED 2

/* stages of a client (a FLUSH goes RELOG, MARK, WAIT) and of the
 * starter (BEGIN, RELOG, MARK, WAIT)
 */
#define C_IDLE 0
#define C_TRIM 1        /* trim: the backend half is next */
#define C_RELOG 2       /* log_barrier: re-logging unlogged dirty blocks */
#define C_MARK 3        /* log_barrier: waiting for a buffer to mark */
#define C_WAIT 4        /* waiting for durable_barrier >= tgt */
#define C_DONE 5
#define C_BEGIN 6       /* starter: hhc_start is next */
#ifdef WAL
#define C_REDO 7        /* starter (WAL): redo the log into the cache */
#define C_REDO2 8       /* starter (WAL): commit, flush the backend */
#endif
#define C_TRIMEND 9     /* BFAIL: trim at the backend, passdown_end next */

#define BIT(x) (1 << (x))
#define MN(a, b) ((a) < (b) -> (a) : (b))
#define NZ(a) ((a) == 0 -> 255 : (a))
#define ONE(c) ((c) -> 1 : 0)

/* ------------------------------------------------------------------ */
/* The log on disk: one record per position per mirror.                */

typedef Rec {
  byte ent[NLBA];    /* LBA table: data of block x, or NONE */
  unsigned seq : 5;  /* 0: nothing valid (never written, torn, dropped) */
  unsigned bar : 1;  /* barrier flag */
  unsigned wrap : 1; /* wrap marker */
  unsigned dur : 1;  /* synced (survives a crash) */
  unsigned base : 5; /* base_seq: first seq of the run that wrote it */
  unsigned rev : 2;  /* revoke table: bit x voids x in older segments */
  unsigned wid : 5;  /* identity of this record (stands for its crc) */
  unsigned prev : 5; /* identity of the record before it in the chain */
};
#define MAXSEQ 31
Rec disk[NMIR * NPOS];
#define D(m, p) disk[(m) * NPOS + (p)]
bool mfail[NMIR];     /* mirror marked failed */
byte nfailed;
#ifdef HEAL
/* Fix 8 (issue 27): what a mirror marked failed is on disk (C: struct
 * mirror failed, want_void, voided).  Without HEAL a failed mirror is
 * cleared at once: voided, as it were, at the moment it fails.
 *
 *   mst       device        its records            replay after SSD loss
 *   M_OK      works         written, synced        read
 *   M_FAILED  fails all I/O frozen as it failed    not read (HEAL_LATE: read)
 *   M_HEALED  works again   frozen, stale          read (stale!)
 *   M_VOID    works         void superblock        blank: nothing
 *
 * Marked failed, a mirror is never written again in this run (not
 * re-admitted); only the void superblock goes to it.
 */
#define M_OK 0
#define M_FAILED 1
#define M_HEALED 2
#define M_VOID 3
byte mst[NMIR];
#endif
byte hintpos[NMIR];   /* superblock head hint: position and seq */
byte hintseq[NMIR];

/* ------------------------------------------------------------------ */
/* The log in RAM (C: gateway/log.c).                                  */

typedef Buf {
  byte ent[NLBA];   /* LBA table: data of block x, or NONE */
  unsigned rev : 2; /* revoke table */
  unsigned old : 2; /* FLAW_REVOKE_OLDBIT: entry x replaced an older one */
  unsigned dy : 2;  /* entry x was replaced while sealed: dying once written */
  unsigned bar : 1; /* wants / carries the barrier flag */
  unsigned st : 2;  /* B_FREE, B_CUR, B_SEALED */
  unsigned id : 5;  /* allocation order (= seq order) */
  unsigned rvu : 4; /* rev_upto - rev_durable: records sealed up to it */
};
Buf buf[NBUF];
byte cur;             /* current (open) buffer, or NONE */
byte q[NBUF];         /* sealed buffers, oldest first */
byte qn;
byte nfree;
byte nextid;
byte durid;           /* id of the newest durable barrier (durable_barrier) */
byte spb;             /* barrier buffer written, its sync pending, or NONE */
#ifndef INFLIGHT
#define INFLIGHT 1      /* barrier segments in flight (issue 32; 1: write, sync, next) */
#endif
#if INFLIGHT > 1
/* Pipelined barriers (issue 32): up to INFLIGHT barrier segments
 * written and not yet durable, oldest first.  The buffer is free once
 * written; what publishing needs is kept here.  Each one's sync (or
 * FUA write) completes on each mirror on its own, in any order
 * (ifsy), and makes durable there that barrier and the segments
 * written between the previous barrier and it (iflo..ifseq).
 * durable_barrier advances only over the oldest ones done on every
 * healthy mirror (the contiguous prefix).
 */
byte ifn;             /* barriers in flight */
byte ifid[INFLIGHT];  /* its buffer id (what tickets name) */
byte ifrvu[INFLIGHT]; /* its rev_upto - rev_durable */
byte ifseq[INFLIGHT]; /* its seq */
byte iflo[INFLIGHT];  /* the first seq its sync makes durable */
byte ifsy[INFLIGHT];  /* mirrors (bits) where its sync completed */
byte nextlo;          /* iflo of the next barrier written */
bool wnbl;            /* a non-barrier segment written since the last barrier written */
#endif
byte pendrev;         /* revokes waiting for a buffer (none current) */
/* Fix 6: tickets are (buffer id, revoke records issued).  Record counts
 * are kept relative to rev_durable (C: they count from the run's start;
 * here a durable barrier subtracts what it made durable from each, so
 * rev_durable is always 0 and a count of 0 is satisfied: fewer states,
 * same comparisons).
 */
byte wantid;          /* want_barrier: a barrier with id >= wantid is owed (0: none) */
byte wantrev;         /* want_revs - rev_durable (0: none owed) */
byte revctr;          /* rev_issued - rev_durable */
bool wnb;             /* a segment written since the newest durable barrier */
byte locb[NLBA];      /* loc[key]: the entry is in buffer locb[x], or NONE... */
byte locs[NLBA];      /* ...or in the written segment of seq locs[x] (0: none) */
byte dyseq[NLBA];     /* oldest dead entry of x that must still hold the head */
byte tailpos;         /* next write position */
byte nextseq;         /* seq of the next record */
byte nused;           /* positions in use from the persisted head */
byte baseseq;         /* base_seq: where a replay of this run's barriers starts */
byte rebase;          /* rebase_seq: first seq of this run */
byte basefrom;        /* base_from: buffers from this id on name rebase (NONE: none yet) */
byte hpos;            /* persisted head (RAM copy of the hint) */
byte hseq;
bool startdur;        /* this run's start-up barrier is durable */
byte reclaims;        /* active reclaims in this run */
byte widctr;          /* record identities handed out */
byte lastwid;         /* identity of the last record of the chain */

/* ------------------------------------------------------------------ */
/* The SSD cache (C: gateway/cache.c), one slot per block.             */

byte cst[NLBA];       /* slot state and data as written (maybe unsynced) */
byte cdat[NLBA];
byte dst[NLBA];       /* slot state and data made durable by cache_commit */
byte ddat[NLBA];

/* The backend. */
byte bcur[NLBA];      /* what it returns now */
byte bdur[NLBA];      /* what survives a crash for sure */
short bpend[NLBA];    /* values written since its last flush (bit v) */
bool trimunfl;        /* a trim went to the backend since its last flush */

/* volume.c */
byte pd[NLBA];        /* passdown counter: odd while a trim runs on x */
bool wb[NLBA];        /* ACT_WB: being written back */
bool redirty[NLBA];   /* ACT_REDIRTY: rewritten during its write-back */

/* The flusher (flusher.c), the clients, the starter (open.c). */
byte flst;            /* 0 idle, 1 backend written, 2 (mutant) revoked */
byte flx;             /* the block being written back */
byte flp;             /* pd[flx] when claimed */
byte wbs;             /* write-backs started in this run */
byte clst[NCLIENT];   /* client stage */
byte clx[NCLIENT];    /* trim: its block; flush: the next block to re-log */
byte clv[NCLIENT];    /* trim: its event */
byte cltgt[NCLIENT];  /* flush: the barrier buffer id it waits for */
byte clrev[NCLIENT];  /* flush: ... and ticket.revs - rev_durable (0: done) */
byte cls0[NCLIENT];   /* flush: what it covers (done[] when issued) */
byte cls1[NCLIENT];
byte cdone;           /* clients done */
byte ststage;         /* starter stage */
byte stx;
byte sttgt;
byte strev;           /* (always 0: no revoke before start-up is over) */
bool started;         /* hhc_start is over: clients and flusher may run */

/* Ghost state for the properties. */
byte ev[NLBA];        /* newest event of x */
byte trims[NLBA];     /* bit k: event k of x was a trim */
#define MAXEV 7
byte done[NLBA];      /* newest completed event of x */
byte cov[NLBA];       /* newest event of x covered by a completed FLUSH */
byte opsleft;         /* client operations left */

byte runno;           /* runs so far */
bool up;              /* false once the model is over */
bool maycrash;        /* this run may crash (else: deadlock check) */
bool crashing;        /* crashed, what the disks kept is next */
bool nolog;           /* every mirror failed, and no FLUSH wrote back since */

#ifdef BFAIL
/* Fixes 9 and 10 (issue 27): the backend's flush may fail; then every
 * write it had not made durable is kept or dropped (Linux drops the
 * dirty pages whose write-back failed: a later flush succeeds without
 * them).
 */
#ifndef MAXBFAIL
#define MAXBFAIL 1      /* failed backend flushes, all runs together */
#endif
byte bfails;          /* backend flushes failed so far */
bool befail;          /* C: vol->be_failed: every FLUSH fails (sticky) */
bool flfail;          /* a backend flush failed since the flusher's write */
byte clbf[NCLIENT];   /* trim: bfails at its start (C: passdown_ticket) */
#endif

#ifdef WAL
/* The write-ahead log (C: log.c checkpoint_locked, persist_head;
 * logstart.c logstart_run, redo_write).
 */
byte ckst;            /* checkpoint: 0 none, 1 begun (commit next), 2 persist next */
byte ckp;             /* the in-memory head (seq) when it began */
byte ckseq;           /* ckpt_seq: that of the last completed checkpoint */
bool lostck;          /* the last mirror failed: the writer owes a checkpoint */
byte rdo[NLBA];       /* the redo map of this start (0: nothing for x) */
bool rdbe;            /* the redo wrote a block to the backend */
#endif

hidden byte k_;       /* scratch, never live across steps */
hidden byte t_;
hidden byte hb;
hidden byte hrv;
hidden byte hbs;

/* ------------------------------------------------------------------ */
/* Helpers.                                                            */

#define CNT(b) (ONE(buf[b].ent[0] != NONE) + ONE(buf[b].ent[1] != NONE))
#define UNLOGGED(x) (cst[x] == S_DIRTY && locb[x] == NONE && locs[x] == 0)
#define RELOG_OK ((cur != NONE && CNT(cur) < SEGCAP) || nfree > 0)
#define NDIRTY (ONE(cst[0] == S_DIRTY) + ONE(cst[1] == S_DIRTY))
#define OWED (wantid != 0 || wantrev != 0)

/* The writer and the barriers in flight: SYNCIDLE none, SEGOK the
 * writer may write a segment, HEADOK it may persist the head or
 * reclaim; EMERG_NB: the newest segment written is under no barrier.
 * One in flight (the default): the writer syncs a barrier before it
 * writes on.
 */
#if INFLIGHT > 1
#define SYNCIDLE (ifn == 0)
#define SEGOK (ifn < INFLIGHT)
#define HEADOK true
#define EMERG_NB wnbl
#else
#define SYNCIDLE (spb == NONE)
#define SEGOK (spb == NONE)
#define HEADOK (spb == NONE)
#define EMERG_NB wnb
#endif

/* Fix 6 (commit 05cba10): a ticket is (buffer id, revoke records
 * issued); with no current buffer its id is the newest buffer's, not
 * the next one's; the emergency barrier carries the pending revokes and
 * is also written when revokes are owed.  FLAW_EMERG_NOREV: log.c
 * without 05cba10, as after its revert f152c39 (ticket = id only, the
 * next buffer's with none current; the emergency barrier carries no
 * revoke).
 */
#ifdef FLAW_EMERG_NOREV
#define REVISSUED 0
#define NOCUR_TGT nextid
#define EMERG_WHY EMERG_NB
#else
#define REVISSUED revctr
#define NOCUR_TGT (nextid - 1)
#define EMERG_WHY (EMERG_NB || (pendrev != 0 && wantrev != 0))
#endif
#ifdef MUT_TICKET_NO_REVS
#define TICKET_REVS 0
#else
#define TICKET_REVS REVISSUED
#endif

/* When the emergency barrier may be written (room is not modelled):
 * when a ticket without a buffer is owed, and with EMERG_FULL also when
 * at most one position is free (C: no room for a normal buffer, only
 * for the emergency barrier; its effect then is to let dead entries
 * die, so that the head can move).
 */
#ifdef EMERG_FULL
#define EMERG_WHEN (OWED || NPOS - nused <= 1)
#else
#define EMERG_WHEN OWED
#endif

/* C: log_barrier_begin's early return: nothing new since the newest
 * durable barrier (no current buffer, or an empty one; no pending
 * revoke; nothing sealed, being written or written since).
 */
#define NOTHING_NEW ((cur == NONE || (CNT(cur) == 0 && buf[cur].rev == 0)) && \
                     pendrev == 0 && qn == 0 && !wnb)
#define WORK (qn > 0 || (cur != NONE && (buf[cur].bar || CNT(cur) >= SEGCAP || OWED)))

/* The seq the persisted head may move up to (C: the oldest segment
 * with a live entry).
 */
#if defined(MUT_HEAD_PAST_LIVE)
#define HLIMIT (hseq + 1)
#else
#define HLIVE MN(MN(MN(NZ(locs[0]), NZ(locs[1])), \
                    MN(NZ(dyseq[0]), NZ(dyseq[1]))), nextseq)
#ifdef FLAW_START_HEAD
#define HLIMIT HLIVE
#else
#define HLIMIT (startdur -> HLIVE : hseq)
#endif
#endif

/* WAL: the persisted head goes no further than the in-memory head when
 * the last checkpoint began (C: ckpt_seq).  FLAW_WAL_NOCKPT: no
 * checkpoint; MUT_WAL_CKPT_LATE: the checkpoint, then the head as it
 * is after it.
 */
#if defined(WAL) && !defined(FLAW_WAL_NOCKPT) && !defined(MUT_WAL_CKPT_LATE)
#define CKLIMIT MN(HLIMIT, ckseq)
#else
#define CKLIMIT HLIMIT
#endif
/* When the head may move: the log is full (C: make_room); with
 * WAL_ANYCKPT at any time (periodic checkpoints, docs/design.md §5.8).
 */
#ifdef WAL_ANYCKPT
#define CKPT_WHEN true
#else
#define CKPT_WHEN (WORK && nused == NPOS)
#endif
#if defined(WAL) && !defined(FLAW_WAL_NOCKPT) && !defined(WAL_CKPT_CONCURRENT)
#define WRIDLE (ckst == 0)   /* the writer thread is not in a checkpoint */
#else
#define WRIDLE true
#endif

/* The writer waits for the head to move: write-back must go on. */
#define LOGSTUCK (SYNCIDLE && WORK && nused == NPOS && HLIMIT <= hseq)

/* The backend (C: backend ops pwrite, trim, flush). */
inline bwrite(x, v) {
  bcur[x] = v;
  bpend[x] = bpend[x] | BIT(v)
}

inline bflush() {
  for (k_ : 0 .. NLBA - 1) {
#ifdef BFAIL
    /* (a write a failed flush dropped is no longer pending) */
    if
    :: bpend[k_] != 0 -> bdur[k_] = bcur[k_]
    :: else
    fi;
#else
    bdur[k_] = bcur[k_];
#endif
    bpend[k_] = 0
  }
  k_ = 0;
  trimunfl = false
}

#ifdef BFAIL
#define BFAIL_OK (bfails < MAXBFAIL)
/* A backend flush fails (C: ops->flush returns an error): of each
 * block's writes since the last flush, nothing or any one reached the
 * disk; the others are dropped for good (the page cache may still
 * serve bcur until a crash, but the pages are no longer dirty, so no
 * later flush writes them).  A trim since the last successful flush
 * (trimunfl, C: be_written > be_flushed) may be among them: every
 * later FLUSH fails (C: vol_backend_flush_failed sets be_failed).
 * counted is 0 for the flusher's own flush in MUT_FLUSHER_FAIL_SILENT;
 * FLAW_BFLUSH_RETRY: no failure counts (C before issue 27: the flush
 * was retried, the retry succeeded).
 */
inline bflush_failed(counted) {
  printf("MSC: backend flush fails (a trim unflushed: %d)\n", trimunfl);
  bfails++;
  for (k_ : 0 .. NLBA - 1) {
    for (t_ : 0 .. TZ) {
      if
      :: (bpend[k_] >> t_) & 1 ->
         if
         :: bdur[k_] = t_
         :: skip
         fi
      :: else
      fi
    }
    t_ = 0;
    bpend[k_] = 0
  }
  k_ = 0;
  /* Fix 10: the flusher's write-back may be among the dropped writes */
  if
  :: flst == 1 -> flfail = true
  :: else
  fi;
#ifndef FLAW_BFLUSH_RETRY
  if
  :: counted && trimunfl -> befail = true
  :: else
  fi
#else
  skip
#endif
}
#endif

/* C: cache_commit: sync slot data, then metadata. */
inline commit() {
  for (k_ : 0 .. NLBA - 1) {
    dst[k_] = cst[k_];
    ddat[k_] = cdat[k_]
  }
  k_ = 0
}

inline clearbuf(b) {
  buf[b].ent[0] = NONE;
  buf[b].ent[1] = NONE;
  buf[b].rev = 0;
  buf[b].old = 0;
  buf[b].dy = 0;
  buf[b].bar = 0;
  buf[b].id = 0;
  buf[b].rvu = 0;
  buf[b].st = B_FREE
}

inline clearrec(m, p) {
  D(m, p).wid = 0;
  D(m, p).prev = 0;
  D(m, p).seq = 0;
  D(m, p).bar = 0;
  D(m, p).wrap = 0;
  D(m, p).dur = 0;
  D(m, p).base = 0;
  D(m, p).ent[0] = 0;
  D(m, p).ent[1] = 0;
  D(m, p).rev = 0
}

#ifdef HEAL
/* Fix 8: which attempts void a failed mirror that works again (C:
 * void_failed).  VOID_BG: the one when it is marked failed and the
 * writer's, about once a second (log_void_failed from writer_thread);
 * VOID_FLUSH: a FLUSH that falls back to write-back (hhc_flush);
 * VOID_CLOSE: log_stop.
 */
#if !defined(FLAW_NO_VOID) && !defined(MUT_VOID_AT_CLOSE) && !defined(MUT_VOID_AT_FLUSH)
#define VOID_BG
#endif
#if !defined(FLAW_NO_VOID) && !defined(MUT_VOID_AT_CLOSE)
#define VOID_FLUSH
#endif
#ifndef FLAW_NO_VOID
#define VOID_CLOSE
#endif

/* C: void_dev: both superblock copies void, synced: the mirror reads
 * as blank (log_open, read_sb: ESTALE).
 */
inline voidmirror(m) {
  printf("MSC: mirror %d voided\n", m);
  for (k_ : 0 .. NPOS - 1) {
    clearrec(m, k_)
  }
  k_ = 0;
  hintpos[m] = 0;
  hintseq[m] = 0;
  mst[m] = M_VOID
}

/* Void every failed mirror that works again (loop variable i). */
inline void_healed(i) {
  for (i : 0 .. NMIR - 1) {
    if
    :: mst[i] == M_HEALED -> voidmirror(i)
    :: else
    fi
  }
  i = 0
}
#endif

/* A free buffer, if there is one, becomes the current one. */
inline alloc() {
  if
  :: nfree > 0 ->
     k_ = 0;
     do
     :: buf[k_].st == B_FREE -> break
     :: else -> k_++
     od;
     buf[k_].st = B_CUR;
     buf[k_].id = nextid;
     nextid++;
     buf[k_].rev = pendrev;
     pendrev = 0;
     nfree--;
     cur = k_;
     k_ = 0
  :: else
  fi
}

inline seal() {
  buf[cur].st = B_SEALED;
  buf[cur].rvu = REVISSUED;   /* every record issued is in a sealed buffer */
  q[qn] = cur;
  qn++;
  cur = NONE
}

/* The writer is done with buffer q[0]. */
inline freehead() {
  clearbuf(q[0]);
  nfree++;
  for (k_ : 0 .. NBUF - 2) {
    q[k_] = q[k_ + 1]
  }
  q[NBUF - 1] = 0;
  k_ = 0;
  qn--
}

/* The older entries of x no longer hold the head: x's newest entry is
 * in a durable barrier, or x was revoked.
 */
inline release(x) {
  dyseq[x] = 0;
  for (k_ : 0 .. NBUF - 1) {
    buf[k_].dy = buf[k_].dy & ~BIT(x)
  }
  k_ = 0
}

/* The newest entry of x (in a sealed buffer or on disk) dies: a newer
 * one replaces it, or x goes unlogged.  It holds the head until x's
 * newer data is durable in the log (release).
 */
inline kill_old(x) {
#ifndef FLAW_HEAD_SUPERSEDE
  if
  :: locs[x] != 0 && dyseq[x] == 0 -> dyseq[x] = locs[x]
  :: locb[x] != NONE && locb[x] != cur ->
     buf[locb[x]].dy = buf[locb[x]].dy | BIT(x)
  :: else
  fi
#else
  skip
#endif
}

/* C: log_append(log, key, lba, data). */
inline log_append(x, v) {
  if
  :: cur != NONE && locb[x] == cur -> buf[cur].ent[x] = v
  :: else ->
     if
     :: cur != NONE && CNT(cur) >= SEGCAP -> seal()
     :: else
     fi;
     if
     :: cur == NONE -> alloc()
     :: else
     fi;
     kill_old(x);
     if
     :: cur == NONE ->
        /* pool exhausted: the write completes, the slot unlogged */
        locb[x] = NONE;
        locs[x] = 0
     :: else ->
        if
        :: locb[x] != NONE || locs[x] != 0 ->
           buf[cur].old = buf[cur].old | BIT(x)
        :: else
        fi;
        buf[cur].ent[x] = v;
        locb[x] = cur;
        locs[x] = 0
     fi
  fi
}

inline addrev(x) {
  if
  :: cur != NONE -> buf[cur].rev = buf[cur].rev | BIT(x)
  :: else -> pendrev = pendrev | BIT(x)
  fi;
#ifndef FLAW_EMERG_NOREV
  revctr++;
  assert(MODEL_bounds || revctr < 16)
#else
  skip
#endif
}

/* C: log_revoke(log, key, lba). */
inline log_revoke(x) {
  if
  :: cur != NONE && locb[x] == cur ->
     buf[cur].ent[x] = NONE;
#ifdef FLAW_REVOKE_OLDBIT
     if
     :: buf[cur].old & BIT(x) -> addrev(x)
     :: else
     fi
#else
     addrev(x)
#endif
  :: else ->
     if
     :: locb[x] != NONE || locs[x] != 0 -> addrev(x)
     :: else ->
        /* no entry known (unlogged, or logged by an earlier run) */
#ifdef FLAW_REVOKE_OLDBIT
        skip
#else
        addrev(x)
#endif
     fi
  fi;
  locb[x] = NONE;
  locs[x] = 0;
#ifndef MUT_REVOKE_NO_RELEASE
  release(x)
#else
  skip
#endif
}

/* ------------------------------------------------------------------ */
/* Properties.                                                         */

/* Names that spin prints with a failed assertion (always false). */
hidden byte P1_covered_data_kept;
hidden byte P2_only_written_data;
hidden byte P3_covered_trim_kept;
hidden byte P4_no_deadlock;
hidden byte INV_live_entry_is_dirty_slot;
hidden byte MODEL_bounds;

/* Block x reads val; c is the newest event of x that a completed FLUSH
 * covers.
 */
inline check(x, val, c) {
  printf("MSC: check block %d reads %d, covered %d, newest %d\n", x, val, c, ev[x]);
  if
  :: val == TZ ->
     /* zeros: only after a trim, one no older than the covered data */
     assert(P2_only_written_data || trims[x] != 0);
     assert(P1_covered_data_kept || (trims[x] >> c) != 0)
  :: else ->
     /* data written to x (no other block's, no torn segment's) */
     assert(P2_only_written_data ||
            (val <= ev[x] && ((trims[x] >> val) & 1) == 0));
     if
     :: (trims[x] >> c) & 1 ->
        /* a covered trim: nothing from before it */
        assert(P3_covered_trim_kept || val > c)
     :: else ->
        /* the covered data or newer (any data once an uncovered trim
         * came after it)
         */
        assert(P1_covered_data_kept || val >= c || (trims[x] >> (c + 1)) != 0)
     fi
  fi
}

/* ------------------------------------------------------------------ */
/* Client operations (C: hhc_write, hhc_trim, hhc_flush in volume.c,  */
/* flush.c).                                                          */

/* Write (C: write_block -> write_hit/write_miss, then log_append).  It
 * waits while a trim runs on the block (write_miss retries).
 */
inline c_write(x) {
  ev[x]++;
  assert(MODEL_bounds || ev[x] <= MAXEV);
  printf("MSC: write %d data %d\n", x, ev[x]);
  cdat[x] = ev[x];
  cst[x] = S_DIRTY;
  if
  :: wb[x] -> redirty[x] = true
  :: else
  fi;
  log_append(x, cdat[x]);
  done[x] = ev[x]
}

/* Trim, first half (C: passdown_begin, invalidate_block once the block
 * is not being written back): free the slot, revoke the block's log
 * entries.  The free is not synced here (commit_invalidations does that
 * in mode wb only); the next cache_commit makes it durable.
 */
inline c_trim1(c, x) {
  ev[x]++;
  assert(MODEL_bounds || ev[x] <= MAXEV);
  printf("MSC: trim %d (event %d)\n", x, ev[x]);
  trims[x] = trims[x] | BIT(ev[x]);
  clv[c] = ev[x];
  clx[c] = x;
  pd[x]++;
#ifdef BFAIL
  clbf[c] = bfails;
#endif
#ifndef MUT_TRIM_NO_REVOKE
  if
  :: cst[x] == S_DIRTY -> log_revoke(x)
  :: else
  fi;
#endif
  cst[x] = S_FREE;
  cdat[x] = 0
}

/* Trim, its end (C: passdown_end, owed): see c_trim2. */
inline c_trim3(c) {
#if defined(BFAIL) && !defined(MUT_PD_END_UNCHECKED)
  if
  :: bfails != clbf[c] ->
     printf("MSC: a backend flush failed while trim %d ran\n", clx[c]);
     befail = true
  :: else
  fi;
#endif
  trimunfl = true;
  pd[clx[c]]++;
  if
  :: clv[c] > done[clx[c]] -> done[clx[c]] = clv[c]
  :: else
  fi;
  clx[c] = 0;
  clv[c] = 0
}

/* Trim, second half: the backend trim (C: passdown_op, passdown_end).
 * BFAIL: two steps, the backend trim and passdown_end (c_trim3), so a
 * backend flush may fail in between, having dropped the trim while
 * trimunfl (C: be_written > be_flushed) does not show it yet: the
 * trim's end makes FLUSHes fail if a flush failed since its start
 * (C: bflush_owed; MUT_PD_END_UNCHECKED: it does not).
 */
inline c_trim2(c) {
#if defined(WAL) && !defined(MUT_WAL_NO_TRIMCOMMIT)
  commit();   /* C: commit_invalidations (the wb modes, hhc among them) */
#endif
  bwrite(clx[c], TZ);
#ifndef BFAIL
  c_trim3(c)
#endif
}

/* No healthy log mirror: write back every dirty block and flush the
 * backend (wbflush semantics).  Needs !wb[0] && !wb[1].
 */
inline wbflush() {
  for (t_ : 0 .. NLBA - 1) {
    if
    :: cst[t_] == S_DIRTY ->
       bwrite(t_, cdat[t_]);
#ifndef BFAIL
       cst[t_] = S_CLEAN;
       log_revoke(t_)
#else
       skip
#endif
    :: else
    fi
  }
  t_ = 0;
#ifdef BFAIL
  /* C: flusher_writeback_all: a batch whose backend flush fails leaves its
   * blocks dirty, and the next batch writes them again.
   */
  if
  :: BFAIL_OK ->
     bflush_failed(1);
     for (t_ : 0 .. NLBA - 1) {
       if
       :: cst[t_] == S_DIRTY -> bwrite(t_, cdat[t_])
       :: else
       fi
     }
     t_ = 0
  :: else
  fi;
  bflush();
  for (t_ : 0 .. NLBA - 1) {
    if
    :: cst[t_] == S_DIRTY ->
       cst[t_] = S_CLEAN;
       log_revoke(t_)
    :: else
    fi
  }
  t_ = 0
#else
  bflush()
#endif
}

/* C: log_barrier (for a FLUSH, cl = 1, stage variables st, x, tgt,
 * rv; for hhc_start, cl = 0, those of the starter): re-log every
 * unlogged dirty block, in any order, each block looked at once (x: the
 * blocks done, a bit each), waiting for a buffer when none is free;
 * then the ticket (tgt: a buffer id, rv: revoke records): a FLUSH with
 * nothing new returns at once; else the current buffer (or a free one,
 * if there is room) is marked as wanting a barrier; a FLUSH that finds
 * none current takes a ticket without one (the starter waits for a
 * buffer).  Goes as far as it can without waiting.
 */
#define ALLDONE 3
inline barrier_progress(st, x, tgt, rv, cl) {
  do
  :: st == C_RELOG && x != ALLDONE ->
     if
     :: !(x & 1) && !UNLOGGED(0) -> x = x | 1
     :: else
     fi;
     if
     :: !(x & 2) && !UNLOGGED(1) -> x = x | 2
     :: else
     fi;
     if
     :: x == ALLDONE
     :: !(x & 1) && RELOG_OK -> log_append(0, cdat[0]); x = x | 1
     :: !(x & 2) && RELOG_OK -> log_append(1, cdat[1]); x = x | 2
     :: else -> break
     fi
  :: st == C_RELOG && x == ALLDONE -> st = C_MARK; x = 0
  :: st == C_MARK && cl && NOTHING_NEW ->
     /* (a FLUSH) nothing new: it returns at once */
     tgt = 0;
     rv = 0;
     st = C_WAIT
  :: st == C_MARK && !(cl && NOTHING_NEW) && (cur != NONE || nfree > 0) ->
     /* the current buffer (a free one here: there is room for it) */
     if
     :: cur == NONE -> alloc()
     :: else
     fi;
     buf[cur].bar = 1;
     tgt = buf[cur].id;
     rv = TICKET_REVS;
     st = C_WAIT
  :: st == C_MARK && cl && !NOTHING_NEW && cur == NONE ->
     /* (a FLUSH) no current buffer: no room for one, or the pool is
      * exhausted; the ticket names a buffer without marking one
      */
     tgt = NOCUR_TGT;
     rv = TICKET_REVS;
     printf("MSC: no current buffer: ticket id %d revokes %d (pending %d)\n", tgt, rv, pendrev);
     if
     :: tgt > durid && tgt > wantid -> wantid = tgt
     :: else
     fi;
     if
     :: rv > wantrev -> wantrev = rv
     :: else
     fi;
     st = C_WAIT
  :: else -> break
  od
}

#define BARRIER_READY(st, x, cl) \
  ((st == C_RELOG && (x == ALLDONE || RELOG_OK || \
                      (!(x & 1) && !UNLOGGED(0)) || (!(x & 2) && !UNLOGGED(1)))) || \
   (st == C_MARK && (cl || cur != NONE || nfree > 0)))

#ifdef MUT_BARRIER_SKIPS_UNLOGGED
#define BARRIER_FIRST C_MARK
#else
#define BARRIER_FIRST C_RELOG
#endif

/* The FLUSH goes on after its backend flush: cache_commit, then
 * log_barrier (or, with no healthy log mirror, wbflush at the end).
 */
inline flush_go(c) {
#ifndef WAL
  commit();
#endif
  if
  :: nfailed < NMIR ->
     clst[c] = BARRIER_FIRST;
     clx[c] = 0
  :: else ->
     cltgt[c] = NONE;
     clx[c] = 0;
     clst[c] = C_WAIT
  fi
}

#ifdef BFAIL
/* The FLUSH returns an error: it covers nothing. */
inline flush_fail(c) {
  printf("MSC: FLUSH by %d fails (a backend flush failed)\n", c);
  cls0[c] = 0;
  cls1[c] = 0;
  cltgt[c] = 0;
  clrev[c] = 0;
  clx[c] = 0;
  clst[c] = C_IDLE
}
#endif

/* C: hhc_flush (mode hhc) is issued: it covers what completed before
 * (cls0, cls1); the backend is flushed if trims went to it; then
 * cache_commit; then log_barrier (or, with no healthy log mirror,
 * wbflush at the end).
 */
inline flush_issue(c) {
  printf("MSC: FLUSH issued by %d, covers %d %d\n", c, done[0], done[1]);
  cls0[c] = done[0];
  cls1[c] = done[1];
#ifdef BFAIL
  /* C: hhc_flush returns EIO at once once a backend flush failed with
   * a passdown unflushed, and when its own backend flush fails
   */
  if
  :: !befail && trimunfl && BFAIL_OK ->
     bflush_failed(1)
#ifdef FLAW_BFLUSH_RETRY
     ; bflush()   /* retried: it succeeds, with nothing left to flush */
#endif
  :: !befail && trimunfl -> bflush()
  :: else
  fi;
  if
  :: befail -> flush_fail(c)
  :: else ->
     flush_go(c)
  fi
#else
  if
  :: trimunfl -> bflush()
  :: else
  fi;
  flush_go(c)
#endif
}

#define FLUSH_READY(c) \
  ((durid >= cltgt[c] && clrev[c] == 0) || \
   (nfailed == NMIR && !wb[0] && !wb[1]))

/* The FLUSH returns successfully: what it covers is covered. */
inline flush_covers(c) {
  printf("MSC: FLUSH by %d returns (barrier id %d)\n", c, cltgt[c]);
  if
  :: cls0[c] > cov[0] -> cov[0] = cls0[c]
  :: else
  fi;
  if
  :: cls1[c] > cov[1] -> cov[1] = cls1[c]
  :: else
  fi
}

/* The FLUSH returns. */
inline flush_end(c) {
  if
  :: durid < cltgt[c] || clrev[c] != 0 ->
     /* WAL: the fallback commits the SSD first (hhc_flush) */
#ifdef WAL
     commit();
#endif
     wbflush(); nolog = false
#if defined(HEAL) && defined(VOID_FLUSH)
     /* C: hhc_flush's fallback calls log_void_failed */
     ; void_healed(t_)
#endif
  :: else
  fi;
#ifdef BFAIL
  if
  :: befail ->
     /* C: hhc_flush, be_failed at its end: a backend flush failed
      * meanwhile (the flusher's, or the write-back's above)
      */
     printf("MSC: FLUSH by %d fails (a backend flush failed)\n", c)
  :: else ->
     flush_covers(c)
  fi;
#else
  flush_covers(c);
#endif
  cls0[c] = 0;
  cls1[c] = 0;
  cltgt[c] = 0;
  clrev[c] = 0;
  clst[c] = C_IDLE
}

#define IDLE(c) (up && started && clst[c] == C_IDLE)
/* The two blocks are alike: block 1 is used once either block was, so
 * that a run and its mirror image (blocks swapped) are not both
 * explored.
 */
#ifdef NOSYM
#define FIRST(X) true
#else
#define FIRST(X) (X == 0 || ev[0] != 0 || ev[1] != 0)
#endif
#define CANWRITE(c, X) ((c == 0 || ALL2) && (pd[X] & 1) == 0 && FIRST(X))
#define CANTRIM(c, X) ((c == 0 || ALL2) && !wb[X] && FIRST(X))
#define OP_WRITE 0
#define OP_FUA 1
#define OP_TRIM 2
#define OP_FLUSH 3

/* A client (C: an NBD connection; the second connection of a
 * multi-conn client only FLUSHes unless ALL2).  Its first step starts
 * an operation (clx[c], clv[c]: which block, which operation) or goes
 * on with a FLUSH's log_barrier.
 */
proctype client(byte c)
{
end_cl:
  do
  :: atomic { (IDLE(c) && opsleft > 0) ||
              (up && BARRIER_READY(clst[c], clx[c], 1)) ->
       if
       :: IDLE(c) ->
          opsleft--;
          if
          :: CANWRITE(c, 0) -> clx[c] = 0; clv[c] = OP_WRITE
          :: CANWRITE(c, 1) -> clx[c] = 1; clv[c] = OP_WRITE
          :: CANWRITE(c, 0) -> clx[c] = 0; clv[c] = OP_FUA
          :: CANWRITE(c, 1) -> clx[c] = 1; clv[c] = OP_FUA
          :: CANTRIM(c, 0) -> clx[c] = 0; clv[c] = OP_TRIM
          :: CANTRIM(c, 1) -> clx[c] = 1; clv[c] = OP_TRIM
          :: clv[c] = OP_FLUSH
          fi;
          if
          :: clv[c] == OP_WRITE || clv[c] == OP_FUA ->
             c_write(clx[c]);
             if
             :: clv[c] == OP_FUA -> flush_issue(c)
             :: else -> clx[c] = 0
             fi;
             clv[c] = 0
          :: clv[c] == OP_TRIM -> c_trim1(c, clx[c]); clst[c] = C_TRIM
          :: clv[c] == OP_FLUSH -> clv[c] = 0; flush_issue(c)
          fi
       :: else
       fi;
       barrier_progress(clst[c], clx[c], cltgt[c], clrev[c], 1) }
#ifndef BFAIL
  :: atomic { up && clst[c] == C_TRIM -> c_trim2(c); clst[c] = C_IDLE }
#else
  :: atomic { up && clst[c] == C_TRIM -> c_trim2(c); clst[c] = C_TRIMEND }
  :: atomic { up && clst[c] == C_TRIMEND -> c_trim3(c); clst[c] = C_IDLE }
#endif
  :: atomic { up && clst[c] == C_WAIT && FLUSH_READY(c) -> flush_end(c) }
  :: atomic { IDLE(c) && opsleft == 0 -> clst[c] = C_DONE; cdone++ }
  od
}

/* ------------------------------------------------------------------ */
/* The flusher (C: flusher.c flusher_batch, finish_block).             */

#define CLAIMABLE(X) (cst[X] == S_DIRTY && !wb[X])

/* C: finish_block: clean only if not rewritten (ACT_REDIRTY) and no
 * trim overlapped; then the volume's callback calls log_revoke.
 */
inline fl_finish() {
  printf("MSC: flusher: backend flushed, finish %d\n", flx);
#ifdef MUT_NO_GENCHECK
  if
  :: pd[flx] == flp ->
#else
  if
  :: !redirty[flx] && pd[flx] == flp ->
#endif
     cst[flx] = S_CLEAN;
     log_revoke(flx)
  :: else
  fi;
  wb[flx] = false;
  redirty[flx] = false;
  flx = 0;
  flp = 0
}

/* BFAIL: the block stays dirty, written back again later (C:
 * finish_block with ok false).
 */
inline fl_keep() {
  printf("MSC: flusher: %d stays dirty\n", flx);
  wb[flx] = false;
  redirty[flx] = false;
  flx = 0;
  flp = 0
}

/* Flush the backend, then finish the block (C: flusher_batch).  BFAIL:
 * the flush may fail: the block stays dirty, and the failure makes
 * FLUSHes fail if a trim may have been dropped (MUT_FLUSHER_FAIL_SILENT:
 * it does not).  Fix 10: the block stays dirty too if another backend
 * flush failed since its write, which that failure may have dropped
 * (FLAW_WB_OTHER_FAIL: C at 5daaef4 trusts its own flush alone).
 */
#ifdef MUT_FLUSHER_FAIL_SILENT
#define FLUSHER_COUNTS 0
#else
#define FLUSHER_COUNTS 1
#endif
#ifdef FLAW_WB_OTHER_FAIL
#define WB_DROPPED false
#else
#define WB_DROPPED flfail
#endif
inline fl_flush() {
#ifdef BFAIL
  if
  :: BFAIL_OK -> bflush_failed(FLUSHER_COUNTS); fl_keep()
  :: bflush();
     if
     :: WB_DROPPED ->
        /* fix 10: another backend flush failed since its write */
        fl_keep()
     :: else -> fl_finish()
     fi
  fi;
  flfail = false
#else
  bflush();
  fl_finish()
#endif
}

proctype flusher()
{
end_fl:
  do
  :: atomic { up && started && flst == 0 && (wbs < MAXWB || LOGSTUCK) &&
              (CLAIMABLE(0) || CLAIMABLE(1)) ->
       /* claim (ACT_WB, ACT_REDIRTY cleared), read the SSD, write the
        * backend
        */
       wbs++;
       if
       :: CLAIMABLE(0) -> flx = 0
       :: CLAIMABLE(1) -> flx = 1
       fi;
       wb[flx] = true;
       redirty[flx] = false;
       flp = pd[flx];
#if defined(WAL) && !defined(MUT_WAL_NO_WBCOMMIT) && !defined(WAL_DROP)
       /* C: flusher_batch commits after reading the slots, before the
        * backend writes
        */
       commit();
#endif
       printf("MSC: flusher writes back %d data %d\n", flx, cdat[flx]);
       bwrite(flx, cdat[flx]);
       flst = 1 }
#ifdef MUT_REVOKE_BEFORE_FLUSH
  :: atomic { up && flst == 1 -> fl_finish(); flst = 2 }
  :: atomic { up && flst == 2 -> bflush(); flst = 0 }
#else
  :: atomic { up && flst == 1 -> fl_flush(); flst = 0 }
#endif
  od
}

/* ------------------------------------------------------------------ */
/* The log writer thread (C: log.c).                                   */

/* Persist a newer head hint (superblock of every healthy mirror). */
inline persist_head() {
  t_ = CKLIMIT;
  printf("MSC: head hint -> seq %d\n", t_);
  nused = nused - (t_ - hseq);
  hpos = (hpos + (t_ - hseq)) % NPOS;
  hseq = t_;
  t_ = 0;
  for (k_ : 0 .. NMIR - 1) {
    if
    :: !mfail[k_] ->
       hintpos[k_] = hpos;
       hintseq[k_] = hseq
    :: else
    fi
  }
  k_ = 0
}

inline putrec(m, p, sq, br, wr, bs, e0, e1, rv) {
  D(m, p).wid = widctr;
  D(m, p).prev = lastwid;
  D(m, p).seq = sq;
  D(m, p).bar = br;
  D(m, p).wrap = wr;
  D(m, p).dur = 0;
  D(m, p).base = bs;
  D(m, p).ent[0] = e0;
  D(m, p).ent[1] = e1;
  D(m, p).rev = rv
}

/* The next segment would not fit before the region's end: a wrap
 * marker (it takes a seq), and go on at the region's start.
 */
inline write_wrap() {
  printf("MSC: wrap marker seq %d at %d\n", nextseq, tailpos);
  widctr++;
  assert(MODEL_bounds || (nextseq < MAXSEQ && widctr < MAXSEQ));
  for (k_ : 0 .. NMIR - 1) {
    if
    :: !mfail[k_] -> putrec(k_, tailpos, nextseq, 0, 1, baseseq, NONE, NONE, 0)
    :: else
    fi
  }
  k_ = 0;
  lastwid = widctr;
  tailpos = 0;
  nused++;
  nextseq++
}

/* Write the oldest sealed buffer (sealing the current one first if the
 * queue is empty) to every healthy mirror.  It carries the barrier flag
 * if marked, or if a ticket without a buffer is owed and it covers it
 * (C: write_buffer, b->seq >= want_barrier, b->rev_upto >= want_revs).
 */
inline write_seg() {
  if
  :: qn == 0 -> seal()
  :: else
  fi;
  hb = q[0];
  if
  :: (wantid != 0 && buf[hb].id >= wantid) ||
     (wantrev != 0 && buf[hb].rvu >= wantrev) -> buf[hb].bar = 1
  :: else
  fi;
  /* C: past half full, every segment is a barrier (`tight`): during
   * start-up (ANYBAR: always) any segment may be one.
   */
  if
#ifdef ANYBAR
  :: !buf[hb].bar -> buf[hb].bar = 1
#else
  :: !started && !buf[hb].bar -> buf[hb].bar = 1
#endif
  :: skip
  fi;
  hrv = buf[hb].rev;
#ifdef MUT_REVOKE_UNCOVERED
  /* the barrier's revokes go into the next segment */
  if
  :: buf[hb].bar ->
     if
     :: cur != NONE -> buf[cur].rev = buf[cur].rev | hrv
     :: else -> pendrev = pendrev | hrv
     fi;
     hrv = 0
  :: else
  fi;
#endif
#ifndef MUT_BASE_AT_SWITCH
  /* Fix 7: buffers sealed before the start-up re-log was complete keep
   * the last run's base, even when written after the switch.
   */
  if
  :: buf[hb].id >= basefrom -> baseseq = rebase
  :: else
  fi;
#endif
#ifdef MUT_NO_BASE
  hbs = 0;
#else
  hbs = baseseq;
#endif
  widctr++;
  assert(MODEL_bounds || (nextseq < MAXSEQ && widctr < MAXSEQ));
  printf("MSC: write seg seq %d at %d: bar %d ent %d %d rev %d\n", nextseq, tailpos, buf[hb].bar, buf[hb].ent[0], buf[hb].ent[1], hrv);
  for (k_ : 0 .. NMIR - 1) {
    if
    :: !mfail[k_] ->
       putrec(k_, tailpos, nextseq, buf[hb].bar, 0, hbs,
              buf[hb].ent[0], buf[hb].ent[1], hrv)
    :: else
    fi
  }
  k_ = 0;
  lastwid = widctr;
  hrv = 0;
  hbs = 0;
  for (k_ : 0 .. NLBA - 1) {
    if
    :: locb[k_] == hb ->
       locb[k_] = NONE;
       locs[k_] = nextseq
    :: else
    fi;
    if
    :: (buf[hb].dy >> k_) & 1 && dyseq[k_] == 0 -> dyseq[k_] = nextseq
    :: else
    fi
  }
  k_ = 0;
  tailpos = (tailpos + 1) % NPOS;
  nused++;
  nextseq++;
#if INFLIGHT > 1
  /* one more barrier in flight; its buffer is free once written */
  if
  :: buf[hb].bar ->
     ifid[ifn] = buf[hb].id;
     ifrvu[ifn] = buf[hb].rvu;
     ifseq[ifn] = nextseq - 1;
     iflo[ifn] = nextlo;
     ifsy[ifn] = 0;
     ifn++;
     nextlo = nextseq;
     wnbl = 0
#ifndef MUT_NOTHING_NEW_INFLIGHT
     ; wnb = 1
#endif
  :: else -> wnbl = 1; wnb = 1
  fi;
  freehead();
#else
  if
  :: buf[hb].bar ->
     spb = hb;
#ifdef MUT_PUBLISH_BEFORE_SYNC
     durid = buf[hb].id
#else
     skip
#endif
  :: else -> wnb = 1; freehead()
  fi;
#endif
  hb = 0
}

/* Sync every healthy mirror, then publish durable_barrier (waking the
 * flushes that wait for it).
 */
inline sync_barrier() {
  printf("MSC: sync mirrors, durable barrier id %d\n", buf[spb].id);
  for (k_ : 0 .. NMIR - 1) {
    if
    :: !mfail[k_] ->
       for (t_ : 0 .. NPOS - 1) {
         D(k_, t_).dur = 1
       }
       t_ = 0
#ifdef MUT_SYNC_ONE_MIRROR
       ; break
#endif
    :: else
    fi
  }
  k_ = 0;
  if
  :: nfailed < NMIR ->
     durid = buf[spb].id;
     wnb = 0;
     if
     :: wantid <= durid -> wantid = 0   /* (satisfied: 0, fewer states) */
     :: else
     fi;
     /* rev_durable = its rev_upto: every count drops by that much */
     hrv = buf[spb].rvu;
     revctr = revctr - hrv;
     wantrev = (wantrev > hrv -> wantrev - hrv : 0);
     for (t_ : 0 .. NCLIENT - 1) {
       clrev[t_] = (clrev[t_] > hrv -> clrev[t_] - hrv : 0)
     }
     for (t_ : 0 .. NBUF - 1) {
       if
       :: buf[t_].st == B_SEALED && t_ != spb -> buf[t_].rvu = buf[t_].rvu - hrv
       :: else
       fi
     }
     hrv = 0;
     if
     :: buf[spb].id >= basefrom -> startdur = true
     :: else   /* (a barrier during the start-up re-log) */
     fi;
     for (t_ : 0 .. NLBA - 1) {
       if
       :: locs[t_] != 0 -> release(t_)
       :: else
       fi
     }
     t_ = 0
  :: else
  fi;
  freehead();
  spb = NONE
}

#if INFLIGHT > 1
/* In-flight barrier i is done on every healthy mirror. */
#define IFDONE(i) ((ifsy[i] | ONE(mfail[0]) | (ONE(mfail[1]) << 1)) == 3)
#define SATSUB(a, b) ((a) > (b) -> (a) - (b) : 0)

/* Publish in-flight barrier i (C: durable_barrier advances to it):
 * what sync_barrier does after the sync, then i leaves the pipeline.
 * Only ever the oldest one (MUT_ACK_OUT_OF_ORDER: any one done).
 */
inline publish(i) {
  if
  :: nfailed < NMIR ->
     printf("MSC: durable barrier id %d (seq %d)\n", ifid[i], ifseq[i]);
     if
     :: ifid[i] > durid -> durid = ifid[i]
     :: else
     fi;
     if
     :: wantid <= durid -> wantid = 0
     :: else
     fi;
     hrv = ifrvu[i];
     revctr = SATSUB(revctr, hrv);
     wantrev = SATSUB(wantrev, hrv);
     for (t_ : 0 .. NCLIENT - 1) {
       clrev[t_] = SATSUB(clrev[t_], hrv)
     }
     for (t_ : 0 .. NBUF - 1) {
       if
       :: buf[t_].st == B_SEALED -> buf[t_].rvu = SATSUB(buf[t_].rvu, hrv)
       :: else
       fi
     }
     for (t_ : 0 .. INFLIGHT - 1) {
       ifrvu[t_] = SATSUB(ifrvu[t_], hrv)
     }
     hrv = 0;
     if
     :: ifid[i] >= basefrom -> startdur = true
     :: else
     fi;
     /* x's newest entry is in a segment now durable (not in a later
      * one still in flight: MUT_RELEASE_INFLIGHT)
      */
     for (t_ : 0 .. NLBA - 1) {
       if
#ifdef MUT_RELEASE_INFLIGHT
       :: locs[t_] != 0 -> release(t_)
#else
       :: locs[t_] != 0 && locs[t_] <= ifseq[i] -> release(t_)
#endif
       :: else
       fi
     }
  :: else
  fi;
  for (t_ : i .. INFLIGHT - 2) {
    ifid[t_] = ifid[t_ + 1];
    ifrvu[t_] = ifrvu[t_ + 1];
    ifseq[t_] = ifseq[t_ + 1];
    iflo[t_] = iflo[t_ + 1];
    ifsy[t_] = ifsy[t_ + 1]
  }
  t_ = 0;
  ifid[INFLIGHT - 1] = 0;
  ifrvu[INFLIGHT - 1] = 0;
  ifseq[INFLIGHT - 1] = 0;
  iflo[INFLIGHT - 1] = 0;
  ifsy[INFLIGHT - 1] = 0;
  ifn--;
  if
#ifdef MUT_NOTHING_NEW_INFLIGHT
  :: nfailed < NMIR -> wnb = wnbl
#else
  :: nfailed < NMIR -> wnb = (ifn > 0 || wnbl)
#endif
  :: else
  fi
}

/* durable_barrier advances over the oldest barriers in flight that
 * are done on every healthy mirror, and stops at the first that is
 * not (MUT_ACK_OUT_OF_ORDER: first barrier i, if it is done, even if
 * an older one is not).
 */
inline advance(i) {
#ifdef MUT_ACK_OUT_OF_ORDER
  if
  :: i < ifn && IFDONE(i) -> publish(i)
  :: else
  fi;
#endif
  do
  :: ifn > 0 && IFDONE(0) -> publish(0)
  :: else -> break
  od
}

/* The sync (or FUA write) of in-flight barrier i completes on mirror
 * m: it and the segments written since the previous barrier are
 * durable there (C: they were complete before the barrier's sync or
 * preflush was issued on that mirror).
 */
inline syncone(i, m) {
  printf("MSC: mirror %d: barrier seq %d durable (from seq %d)\n", m, ifseq[i], iflo[i]);
  for (t_ : 0 .. NPOS - 1) {
    if
    :: D(m, t_).seq != 0 && D(m, t_).seq >= iflo[i] && D(m, t_).seq <= ifseq[i] ->
       D(m, t_).dur = 1
    :: else
    fi
  }
  t_ = 0;
  ifsy[i] = ifsy[i] | BIT(m);
  advance(i)
}

#define SYNCOPT(i, m) \
  :: atomic { up && WRIDLE && ifn > i && !mfail[m] && !((ifsy[i] >> m) & 1) -> \
       syncone(i, m) }
#endif

/* Active reclaim: re-log the live entries of the head segment (data
 * read from the SSD, never from the log) and ask for a barrier.
 */
inline reclaim() {
  printf("MSC: active reclaim of head seq %d\n", hseq);
  reclaims++;
  for (t_ : 0 .. NLBA - 1) {
    if
    :: locs[t_] == hseq ->
       /* a live entry holds the block's dirty data on the SSD */
       assert(INV_live_entry_is_dirty_slot || cst[t_] == S_DIRTY);
       assert(INV_live_entry_is_dirty_slot || nfailed == NMIR ||
              cdat[t_] == (mfail[0] -> D(1, hpos).ent[t_] : D(0, hpos).ent[t_]));
       log_append(t_, cdat[t_])
    :: else
    fi
  }
  t_ = 0;
#ifndef FLAW_HEAD_SUPERSEDE
  buf[cur].bar = 1
#else
  skip
#endif
}

/* C: make_room's emergency barrier: no buffer is current and none can
 * be for lack of room, so a barrier goes into the room kept for it:
 * a header only, no data block, with the pending revokes (fix 6;
 * FLAW_EMERG_NOREV: none, they stay pending).  It takes a free buffer
 * and the next id; write_seg writes it.
 */
inline emergency() {
  k_ = 0;
  do
  :: buf[k_].st == B_FREE -> break
  :: else -> k_++
  od;
  buf[k_].st = B_SEALED;
  buf[k_].id = nextid;
  nextid++;
  buf[k_].bar = 1;
#ifndef FLAW_EMERG_NOREV
  buf[k_].rev = pendrev;
  pendrev = 0;
  buf[k_].rvu = revctr;
#endif
  printf("MSC: emergency barrier id %d rev %d (pending %d)\n", buf[k_].id, buf[k_].rev, pendrev);
  nfree--;
  q[qn] = k_;
  qn++;
  k_ = 0
}

proctype writer()
{
end_wr:
  do
#if defined(WAL) && !defined(FLAW_WAL_NOCKPT)
  /* C: persist_head, checkpoint_locked: if the in-memory head moved
   * past the last checkpoint's, remember it (P) and commit the SSD
   * with the lock dropped (the other threads go on); then persist a
   * head of at most P.
   */
  :: atomic { up && ckst == 0 && SYNCIDLE && CKPT_WHEN && HLIMIT > hseq ->
       if
       :: HLIMIT > ckseq ->
          ckp = HLIMIT;
          printf("MSC: checkpoint begins, head seq %d\n", ckp);
          ckst = 1
       :: else -> persist_head()
       fi }
  :: atomic { up && ckst == 1 ->
       commit();
       printf("MSC: checkpoint: SSD committed\n");
       ckseq = ckp;
       ckp = 0;
       ckst = 2 }
  :: atomic { up && ckst == 2 ->
       if
       :: CKLIMIT > hseq -> persist_head()
       :: else
       fi;
       ckst = 0 }
#else
  :: atomic { up && HEADOK && CKPT_WHEN && HLIMIT > hseq ->
       persist_head() }
#endif
#if defined(WAL) && !defined(FLAW_WAL_NOLOSTCKPT)
  /* C: writer_thread, healthy == 0 && !lost_ckpt: what FLUSHes made
   * durable in the log only goes to the SSD
   */
  :: atomic { up && lostck ->
       printf("MSC: last mirror failed: checkpoint\n");
       commit();
       lostck = false }
#endif
  :: atomic { up && WRIDLE && SEGOK && WORK && nused < NPOS && tailpos == NPOS - 1 ->
       write_wrap() }
  :: atomic { up && WRIDLE && SEGOK && WORK && nused < NPOS -> write_seg() }
#if INFLIGHT > 1
  SYNCOPT(0, 0)
  SYNCOPT(0, 1)
  SYNCOPT(1, 0)
  SYNCOPT(1, 1)
#if INFLIGHT > 2
  SYNCOPT(2, 0)
  SYNCOPT(2, 1)
#endif
#if INFLIGHT > 3
#error "INFLIGHT > 3: add SYNCOPT rows"
#endif
  /* (a mirror failed: the oldest may be done on every healthy one) */
  :: atomic { up && WRIDLE && ifn > 0 && IFDONE(0) -> advance(0) }
#else
  :: atomic { up && WRIDLE && spb != NONE -> sync_barrier() }
#endif
  /* No current buffer, nothing sealed (C: make_room).  Room is not
   * modelled: either there is room (a buffer becomes current, here when
   * a ticket without a buffer is owed) or there is none (an emergency
   * barrier, when the newest written segment is not under a durable
   * barrier or, fix 6, revokes are owed).
   */
  :: atomic { up && WRIDLE && nfailed < NMIR && cur == NONE && qn == 0 && OWED -> alloc() }
  :: atomic { up && WRIDLE && started && nfailed < NMIR && cur == NONE && qn == 0 &&
              nused < NPOS && EMERG_WHY && EMERG_WHEN -> emergency() }
  :: atomic { up && WRIDLE && HEADOK && reclaims < MAXRECLAIM &&
              NPOS - nused <= RECLAIM_FREE &&
              (locs[0] == hseq || locs[1] == hseq) && RELOG_OK ->
       reclaim() }
  od
}

/* ------------------------------------------------------------------ */
/* Start-up on the intact SSD (C: open.c, hhc_start).                  */

/* hhc_start: re-log every dirty block and write a barrier (its header,
 * like every header of this run, carries base_seq) before any client
 * I/O.  If the free log space is too small for that, write every dirty
 * block back first and start from an empty log.
 */
#ifdef WAL
/* C: redo_write: each block of the redo map goes into the slot the
 * loaded metadata gives its LBA (dirty or clean), else a free slot
 * (persisted free), else (no free slot) the backend; it becomes dirty.
 * Every slot here is its LBA's, so "no free slot" is a choice.
 */
inline redo_apply() {
  for (t_ : 0 .. NLBA - 1) {
    if
#ifdef WAL_DROP
    :: rdo[t_] == RVK ->
       /* revoked: written back or trimmed, the slot may be stale */
       printf("MSC: redo %d: revoked, dropped from the cache\n", t_);
       cst[t_] = S_FREE;
       cdat[t_] = 0;
       rdo[t_] = 0
#endif
    :: rdo[t_] != 0 && rdo[t_] != RVK ->
       if
       :: cst[t_] != S_FREE ->
          printf("MSC: redo %d data %d into its slot (state %d)\n", t_, rdo[t_], cst[t_]);
          cdat[t_] = rdo[t_];
#ifndef MUT_WAL_REDO_KEEPSTATE
          cst[t_] = S_DIRTY
#else
          skip
#endif
       :: cst[t_] == S_FREE ->
          printf("MSC: redo %d data %d into a free slot\n", t_, rdo[t_]);
          cdat[t_] = rdo[t_];
          cst[t_] = S_DIRTY
       :: cst[t_] == S_FREE ->
          printf("MSC: redo %d data %d: no free slot, to the backend\n", t_, rdo[t_]);
          bwrite(t_, rdo[t_]);
          rdbe = true
       fi;
       rdo[t_] = 0
    :: else
    fi
  }
  t_ = 0
}

/* The redo's end (C: logstart_run): cache_commit, flush the backend if
 * the redo wrote to it.  Then block i reads w: checked, and what a
 * client reads from now on counts as completed.
 */
inline redo_end(i, w) {
#ifndef MUT_WAL_REDO_NOCOMMIT
  commit();
#endif
  if
  :: rdbe -> bflush()
  :: else
  fi;
  rdbe = false;
  for (i : 0 .. NLBA - 1) {
    w = (cst[i] != S_FREE -> cdat[i] : bdur[i]);
    check(i, w, cov[i]);
    done[i] = ((w != TZ && w > cov[i]) -> w : cov[i])
  }
  i = 0;
  w = 0
}
#endif

proctype starter()
{
end_st:
  do
#ifdef WAL
  /* Restart after a crash in hhc (C: cache state "in use, hhc"): redo
   * the log into the cache before anything else.  A crash meanwhile
   * redoes again at the next start (the log is not written before the
   * new base barrier).
   */
  :: atomic { up && ststage == C_REDO -> redo_apply(); ststage = C_REDO2 }
  :: atomic { up && ststage == C_REDO2 ->
       redo_end(t_, hb);
       ststage = C_BEGIN }
#endif
  :: atomic { up && (ststage == C_BEGIN || BARRIER_READY(ststage, stx, 0)) ->
       if
       :: ststage == C_BEGIN ->
#if !defined(FLAW_START_HEAD) && !defined(MUT_START_NO_WRITEBACK)
         if
         :: NPOS - nused < (NDIRTY == 0 -> 1 : NDIRTY) + 1 ->
            printf("MSC: start-up: log too full, write back everything\n");
            for (k_ : 0 .. NLBA - 1) {
              if
              :: cst[k_] == S_DIRTY -> bwrite(k_, cdat[k_]); cst[k_] = S_CLEAN
              :: else
              fi
            }
            k_ = 0;
            bflush();
            commit();
            hpos = tailpos;
            hseq = nextseq;
            nused = 0;
            for (k_ : 0 .. NMIR - 1) {
              if
              :: !mfail[k_] -> hintpos[k_] = hpos; hintseq[k_] = hseq
              :: else
              fi
            }
            k_ = 0;
            startdur = true
         :: else
         fi;
#endif
         if
         :: nfailed < NMIR ->
            ststage = C_RELOG;
            stx = 0
         :: else ->
            ststage = C_IDLE;
            started = true
         fi
       :: else
       fi;
       barrier_progress(ststage, stx, sttgt, strev, 0);
       /* Every dirty block is in a buffer: this run's base from the
        * start-up barrier's buffer on (C: log_rebase, base_from).
        */
       if
       :: ststage == C_WAIT && basefrom == NONE ->
          basefrom = sttgt
#ifdef MUT_BASE_AT_SWITCH
          ; baseseq = rebase
#endif
       :: else
       fi }
  :: atomic { up && ststage == C_WAIT && (durid >= sttgt || nfailed == NMIR) ->
       /* (if the last mirror failed meanwhile, FLUSHes write back) */
       printf("MSC: start-up barrier durable\n");
       ststage = C_IDLE;
       sttgt = 0;
       started = true }
  od
}

/* ------------------------------------------------------------------ */
/* Faults, restart, recovery: steps of init.                           */

/* A mirror fails: marked failed, skipped from then on.  Without HEAL
 * it is unreadable at recovery for good (cleared); with HEAL its
 * records stay as they were (frozen; its unsynced ones are kept or
 * lost when it is read), unreadable while it fails.
 */
inline failmirror(m) {
  printf("MSC: mirror %d fails\n", m);
  mfail[m] = true;
  nfailed++;
  nolog = (nfailed == NMIR);
#if defined(WAL) && !defined(FLAW_WAL_NOLOSTCKPT)
  lostck = (nfailed == NMIR);
#endif
#ifdef HEAL
  mst[m] = M_FAILED
#else
  for (k_ : 0 .. NPOS - 1) {
    clearrec(m, k_)
  }
  k_ = 0;
  hintpos[m] = 0;
  hintseq[m] = 0
#endif
}

#ifdef HEAL
/* A failed mirror's device works again, while the gateway runs (after
 * the crash: HEAL_LATE, at replay).  VOID_BG: the gateway tries to void
 * it at once when it marks it failed and then about once a second, so
 * it sees the mirror work again with the void write: heal and void are
 * one step here (a device that works again but is not tried before a
 * crash is one that heals after the crash: the gap, HEAL_LATE).
 */
inline healmirror(m) {
  printf("MSC: mirror %d works again\n", m);
#ifdef VOID_BG
  voidmirror(m)
#else
  mst[m] = M_HEALED
#endif
}
#endif

/* The log's RAM state, empty (start of a run). */
inline reset_log_ram() {
  for (k_ : 0 .. NBUF - 1) {
    clearbuf(k_);
    q[k_] = 0
  }
  for (k_ : 0 .. NLBA - 1) {
    locb[k_] = NONE;
    locs[k_] = 0;
    dyseq[k_] = 0
  }
  k_ = 0;
  cur = NONE;
  qn = 0;
  nfree = NBUF;
  nextid = 1;
  durid = 0;
  spb = NONE;
#if INFLIGHT > 1
  for (k_ : 0 .. INFLIGHT - 1) {
    ifid[k_] = 0;
    ifrvu[k_] = 0;
    ifseq[k_] = 0;
    iflo[k_] = 0;
    ifsy[k_] = 0
  }
  k_ = 0;
  ifn = 0;
  nextlo = 0;
  wnbl = 0;
#endif
  pendrev = 0;
  wantid = 0;
  wantrev = 0;
  revctr = 0;
  wnb = 0;
#ifdef WAL
  ckst = 0;
  ckp = 0;
  ckseq = 0;
#endif
  reclaims = 0
}

/* A crash: what only RAM held is gone. */
inline forget_ram() {
  reset_log_ram();
  for (x : 0 .. NLBA - 1) {
    pd[x] = 0;
    wb[x] = false;
    redirty[x] = false;
    done[x] = 0
  }
  for (x : 0 .. NCLIENT - 1) {
    clst[x] = C_IDLE;
    clx[x] = 0;
    clv[x] = 0;
    cltgt[x] = 0;
    clrev[x] = 0;
    cls0[x] = 0;
    cls1[x] = 0
#ifdef BFAIL
    ; clbf[x] = 0
#endif
  }
  x = 0;
  tailpos = 0; nextseq = 0; nused = 0; baseseq = 0; hpos = 0; hseq = 0;
  rebase = 0; basefrom = 0;
  startdur = 0; widctr = 0; lastwid = 0; trimunfl = 0;
  flst = 0; flx = 0; flp = 0; wbs = 0; cdone = 0;
  ststage = C_IDLE; stx = 0; sttgt = 0; strev = 0; started = 0; maycrash = 0
#ifdef WAL
  ; lostck = 0; rdbe = 0
#endif
#ifdef BFAIL
  ; befail = 0; flfail = 0   /* the volume is reopened */
#endif
}

/* Crash: the backend keeps, of what it got since its last flush,
 * nothing or any one write.
 */
inline crash_backend() {
  for (x : 0 .. NLBA - 1) {
    for (v : 0 .. TZ) {
      if
      :: (bpend[x] >> v) & 1 ->
         if
         :: bdur[x] = v
         :: skip
         fi
      :: else
      fi
    }
    v = 0;
    bcur[x] = bdur[x];
    bpend[x] = 0
  }
  x = 0
}

/* Crash: each block's unsynced slot write (data and metadata) is kept
 * or lost.
 */
inline crash_ssd() {
  for (x : 0 .. NLBA - 1) {
    if
    :: cst[x] != dst[x] || cdat[x] != ddat[x] ->
       if
       :: dst[x] = cst[x]; ddat[x] = cdat[x]
       :: skip
       fi
    :: else
    fi;
    cst[x] = dst[x];
    cdat[x] = ddat[x]
  }
  x = 0
}

/* Crash: each unsynced record of mirror m is kept or lost (torn). */
inline crash_mirror(m) {
  for (p : 0 .. NPOS - 1) {
    if
    :: D(m, p).seq != 0 && !D(m, p).dur ->
       if
       :: D(m, p).dur = 1
       :: clearrec(m, p)
       fi
    :: else
    fi
  }
  p = 0
}

#define SAMEREC(p) (D(0, p).seq == D(1, p).seq && D(0, p).bar == D(1, p).bar && \
                    D(0, p).wrap == D(1, p).wrap && D(0, p).dur == D(1, p).dur && \
                    D(0, p).base == D(1, p).base && D(0, p).rev == D(1, p).rev && \
                    D(0, p).ent[0] == D(1, p).ent[0] && D(0, p).ent[1] == D(1, p).ent[1] && \
                    D(0, p).wid == D(1, p).wid && D(0, p).prev == D(1, p).prev)
#if NPOS == 3
#define SAMEHIGH true
#elif NPOS == 4
#define SAMEHIGH SAMEREC(3)
#elif NPOS == 5
#define SAMEHIGH (SAMEREC(3) && SAMEREC(4))
#else
#error "NPOS > 5: extend SAMEHIGH"
#endif
#define SAMEMIRRORS (SAMEREC(0) && SAMEREC(1) && SAMEREC(2) && SAMEHIGH && \
                     hintpos[0] == hintpos[1] && hintseq[0] == hintseq[1])

#ifdef FLAW_SEQ_REUSE
#define LINKED(m, p) true
#else
/* the record names the one before it (C: the previous header's crc) */
#define LINKED(m, p) (n == 0 || D(m, p).prev == lw)
#endif

/* Scan mirror m from its head hint, following seq + 1 over valid
 * records: p, s end at the first position that does not continue the
 * chain, n is the chain's length, lw its last record's identity, lb the
 * seq of its last barrier (0: none), lbase that barrier's base_seq.
 */
inline scan(m) {
  p = hintpos[m];
  s = hintseq[m];
  n = 0;
  lb = 0;
  lbase = 0;
  lw = 0;
  do
  :: n < NPOS && s != 0 && D(m, p).seq == s && LINKED(m, p) ->
     lw = D(m, p).wid;
     if
     :: D(m, p).bar -> lb = s; lbase = D(m, p).base
     :: else
     fi;
     n++;
     s++;
     p = (p + 1) % NPOS
#ifdef MUT_REPLAY_PAST_HOLE
  /* the walk steps over one invalid record (a torn segment) and goes
   * on with the next seq, trusting that record's link
   */
  :: n + 1 < NPOS && s != 0 && k_ == 0 && D(m, p).seq != s &&
     D(m, (p + 1) % NPOS).seq == s + 1 ->
     printf("MSC: replay steps over torn seq %d at %d\n", s, p);
     k_ = 1;
     lw = D(m, (p + 1) % NPOS).prev;
     n++;
     s++;
     p = (p + 1) % NPOS
#endif
  :: else -> break
  od
#ifdef MUT_REPLAY_PAST_HOLE
  ; k_ = 0
#endif
}

#ifdef MUT_REPLAY_PAST_HOLE
#define NOT_STEPPED(m, p) (D(m, p).seq == s)
#else
#define NOT_STEPPED(m, p) true
#endif

/* C: log_replay's map: the segments from max(head hint, base_seq of
 * the last barrier) to the last barrier in seq order, each one's
 * revoke table first, then its LBA table.
 */
inline logmap(m) {
  scan(m);
#ifdef MUT_REPLAY_PAST_BARRIER
  lb = s - 1;
  lbase = D(m, (p + NPOS - 1) % NPOS).base;
#endif
#ifdef MUT_NO_BASE
  st = hintseq[m];
#else
  st = (lbase > hintseq[m] -> lbase : hintseq[m]);
#endif
  p = hintpos[m];
  s = hintseq[m];
  mp[0] = NONE;
  mp[1] = NONE;
  do
  :: s != 0 && s <= lb ->
     if
     :: s >= st && !D(m, p).wrap && NOT_STEPPED(m, p) ->
        printf("MSC: replay seq %d ent %d %d rev %d\n", s, D(m, p).ent[0], D(m, p).ent[1], D(m, p).rev);
#ifndef MUT_REPLAY_ENT_BEFORE_REV
        for (x : 0 .. NLBA - 1) {
          if
          :: (D(m, p).rev >> x) & 1 -> mp[x] = RVK
          :: else
          fi
        }
#endif
        for (x : 0 .. NLBA - 1) {
          if
          :: D(m, p).ent[x] != NONE -> mp[x] = D(m, p).ent[x]
          :: else
          fi
        }
#ifdef MUT_REPLAY_ENT_BEFORE_REV
        for (x : 0 .. NLBA - 1) {
          if
          :: (D(m, p).rev >> x) & 1 -> mp[x] = RVK
          :: else
          fi
        }
#endif
        x = 0
     :: else
     fi;
     s++;
     p = (p + 1) % NPOS
  :: else -> break
  od
}

/* C: log_replay: write the map to the backend and flush it. */
inline replay(m) {
  logmap(m);
  for (x : 0 .. NLBA - 1) {
    if
    :: mp[x] != NONE && mp[x] != RVK -> bdur[x] = mp[x]
    :: else
    fi
  }
  x = 0;
  printf("MSC: replayed mirror %d seq %d..%d: backend %d %d\n", m, st, lb, bdur[0], bdur[1])
}

/* Copy the n records of mirror f's chain from the head hint onto
 * mirror d, and sync them.
 */
inline copychain(d, f, n) {
  for (p : 0 .. n - 1) {
    s = (hintpos[f] + p) % NPOS;
    D(d, s).seq = D(f, s).seq;
    D(d, s).bar = D(f, s).bar;
    D(d, s).wrap = D(f, s).wrap;
    D(d, s).dur = 1;
    D(d, s).base = D(f, s).base;
    D(d, s).ent[0] = D(f, s).ent[0];
    D(d, s).ent[1] = D(f, s).ent[1];
    D(d, s).rev = D(f, s).rev;
    D(d, s).wid = D(f, s).wid;
    D(d, s).prev = D(f, s).prev
  }
  p = 0;
  s = 0
}

/* Only the chain of n records from mirror m's head hint can ever be
 * read again (a record outside it never links to a newer one): clear
 * the rest and number the chain's identities from 1 (fewer states,
 * same behaviour).
 */
inline canon(n) {
  for (p : 0 .. NPOS - 1) {
    s = (p + NPOS - hintpos[m]) % NPOS;   /* index in the chain */
    for (t_ : 0 .. NMIR - 1) {
      if
      :: mfail[t_]
      :: !mfail[t_] && s >= n -> clearrec(t_, p)
      :: !mfail[t_] && s < n ->
         D(t_, p).wid = s + 1;
         D(t_, p).prev = s
      fi
    }
    t_ = 0
  }
  p = 0;
  s = 0;
  lastwid = n;
  widctr = n
}

/* Restart on the intact SSD (C: open.c): the cache was reloaded (every
 * dirty block unlogged); find the log's tail; the new run's first seq
 * is its base_seq; then the starter runs hhc_start.
 */
inline restart() {
  reset_log_ram();
  if
  :: nfailed < NMIR ->
     m = (mfail[0] -> 1 : 0);
#ifndef FLAW_MIRROR_DIVERGE
     /* The mirrors may have kept different unsynced records: take the
      * longest chain and copy it onto the other healthy mirror.
      */
     if
     :: nfailed == 0 ->
        scan(1);
        st = n;
        scan(0);
        if
        :: st > n -> m = 1; copychain(0, 1, st)
        :: st < n -> copychain(1, 0, n)
        :: else
        fi;
        st = 0
     :: else
     fi;
#endif
     scan(m);
     lastwid = lw;
     widctr = lw;
#ifdef MUT_REPLAY_PAST_HOLE
     /* no canon: the records outside the chain stay, and new
      * identities must differ from theirs
      */
     for (t_ : 0 .. NMIR * NPOS - 1) {
       if
       :: disk[t_].wid > widctr -> widctr = disk[t_].wid
       :: else
       fi
     }
     t_ = 0;
#endif
     tailpos = p;
     nextseq = s;
     nused = n;
     hpos = hintpos[m];
     hseq = hintseq[m];
#if !defined(FLAW_SEQ_REUSE) && !defined(FLAW_MIRROR_DIVERGE) && !defined(MUT_REPLAY_PAST_HOLE)
     canon(n);
#endif
#ifndef WAL
     m = 0
#else
     skip   /* (m: the mirror the redo map is read from, below) */
#endif
  :: else ->
     /* no log: keep going on the RAM view */
     tailpos = 0;
     nextseq = 1;
     nused = 0;
     hpos = 0;
     hseq = 1
  fi;
  printf("MSC: restart: tail seq %d at %d, head %d at %d, used %d\n", nextseq, tailpos, hseq, hpos, nused);
#if INFLIGHT > 1
  nextlo = nextseq;
#endif
  /* Fix 7: until the start-up re-log is complete, segments name the
   * base a replay would use now: the last barrier's (C: log_start).
   */
#ifdef MUT_BASE_AT_START
  baseseq = nextseq;
#else
  baseseq = (lb != 0 && nfailed < NMIR -> lbase : nextseq);
#endif
  rebase = nextseq;
  basefrom = NONE;
#ifdef WAL
  /* The redo map (C: log_replay into redo_write): what a replay of the
   * chain just scanned would write, from the head hint (or the last
   * barrier's base) to the last barrier, revokes applied.
   * FLAW_WAL_NOREDO: the restart trusts the SSD as it is.
   */
#ifndef FLAW_WAL_NOREDO
  if
  :: nfailed < NMIR ->
     logmap(m);
     for (x : 0 .. NLBA - 1) {
       rdo[x] = (mp[x] == NONE -> 0 : mp[x]);
       mp[x] = 0
     }
     x = 0;
     st = 0
  :: else
  fi;
#endif
  m = 0;
#endif
  p = 0;
  s = 0;
  n = 0;
  lb = 0;
  lbase = 0;
  lw = 0;
#ifdef FLAW_START_HEAD
  startdur = true;
#else
  startdur = false;
#endif
#ifdef WAL
  ststage = C_REDO
#else
  ststage = C_BEGIN
#endif
}

/* Crash: what each mirror kept (restart follows). */
inline crash_mirrors() {
#if !defined(FLAW_SEQ_REUSE) && !defined(FLAW_MIRROR_DIVERGE) && !defined(MUT_REPLAY_PAST_HOLE)
  /* Two identical mirrors: restart() takes the longer chain
   * and clears what is outside it, so what mirror 0 alone
   * can keep gives every outcome.
   */
  if
  :: nfailed == 0 && SAMEMIRRORS ->
     crash_mirror(0);
     for (p : 0 .. NPOS - 1) {
       D(1, p).seq = D(0, p).seq;
       D(1, p).bar = D(0, p).bar;
       D(1, p).wrap = D(0, p).wrap;
       D(1, p).dur = D(0, p).dur;
       D(1, p).base = D(0, p).base;
       D(1, p).ent[0] = D(0, p).ent[0];
       D(1, p).ent[1] = D(0, p).ent[1];
       D(1, p).rev = D(0, p).rev;
       D(1, p).wid = D(0, p).wid;
       D(1, p).prev = D(0, p).prev
     }
     p = 0
  :: else ->
     for (m : 0 .. NMIR - 1) {
       crash_mirror(m)
     }
  fi
#else
  for (m : 0 .. NMIR - 1) {
    crash_mirror(m)
  }
#endif
}

/* WAL: a crash between the failure of the last mirror and the
 * writer's checkpoint loses what FLUSHes made durable in the log only
 * (a double fault, like losing every mirror and then the SSD): not
 * checked unless WAL_LOSTWINDOW.
 */
#if defined(WAL) && !defined(WAL_LOSTWINDOW)
#define CRASH_OK (!lostck)
#else
#define CRASH_OK true
#endif

/* WAL: the redo runs before the log is started, and C marks a mirror
 * failed only when a log write or sync fails (mirrors_io): no mirror
 * fails between the redo's first write and its backend flush.
 * WAL_FAIL_IN_REDO: one may (then the lost-mirror checkpoint, a
 * commit, leaves the redo's unflushed backend writes exposed).
 */
#if defined(WAL) && !defined(WAL_FAIL_IN_REDO)
#define FAIL_OK (ststage != C_REDO && ststage != C_REDO2)
#else
#define FAIL_OK true
#endif

/* The end: every variable zeroed, no process moves again. */
inline halt() {
  up = false;
  for (x : 0 .. NMIR * NPOS - 1) {
    disk[x].seq = 0;
    disk[x].bar = 0;
    disk[x].wrap = 0;
    disk[x].dur = 0;
    disk[x].base = 0;
    disk[x].ent[0] = 0;
    disk[x].ent[1] = 0;
    disk[x].rev = 0;
    disk[x].wid = 0;
    disk[x].prev = 0
  }
  for (x : 0 .. NMIR - 1) {
#ifdef HEAL
    mst[x] = 0;
#endif
    mfail[x] = 0;
    hintpos[x] = 0;
    hintseq[x] = 0
  }
  for (x : 0 .. NBUF - 1) {
    buf[x].ent[0] = 0;
    buf[x].ent[1] = 0;
    buf[x].st = 0
  }
  for (x : 0 .. NLBA - 1) {
    locb[x] = 0;
    cst[x] = 0; cdat[x] = 0; dst[x] = 0; ddat[x] = 0;
    bcur[x] = 0; bdur[x] = 0; bpend[x] = 0;
    ev[x] = 0; trims[x] = 0; done[x] = 0; cov[x] = 0;
#ifdef WAL
    rdo[x] = 0;
#endif
    mp[x] = 0
  }
  forget_ram();
  for (x : 0 .. NBUF - 1) {
    buf[x].ent[0] = 0;
    buf[x].ent[1] = 0
  }
  for (x : 0 .. NLBA - 1) {
    locb[x] = 0
  }
  nfailed = 0; cur = 0; nfree = 0; nextid = 0; spb = 0; nolog = 0;
  opsleft = 0; runno = 0;
#ifdef BFAIL
  bfails = 0;
#endif
  x = 0; m = 0; p = 0; s = 0; n = 0; lb = 0; lbase = 0; st = 0; v = 0;
  lw = 0
}

/* Which mirrors a restart on a new SSD may read: a healthy one; with
 * HEAL, when none is healthy, also one that works again and is not
 * voided, and with HEAL_LATE one that failed and was not voided (it
 * works again after the crash: the gap fix 8 leaves).  (C replays the
 * mirror with the newest barrier: a healthy one has every segment a
 * failed one has, and more.)
 */
#if !defined(HEAL)
#define RDOK(m) (!mfail[m])
#elif defined(HEAL_LATE)
#define RDOK(m) (mst[m] == M_OK || (nfailed == NMIR && mst[m] != M_VOID))
#else
#define RDOK(m) (mst[m] == M_OK || (nfailed == NMIR && mst[m] == M_HEALED))
#endif
#ifdef HEAL
#define RDMSG(m) \
  if \
  :: mst[m] == M_HEALED -> printf("MSC: replay reads mirror %d (failed, works again, not voided)\n", m) \
  :: mst[m] == M_FAILED -> printf("MSC: mirror %d works again after the crash, not voided\n", m) \
  :: else \
  fi
#else
#define RDMSG(m) skip
#endif

/* The SSD is lost (the gateway is down): replay the log of a readable
 * mirror (the other one may be lost too; two identical mirrors give
 * the same outcomes, then mirror 0 stands for both), check every block
 * on the backend.
 */
inline ssd_lost() {
  printf("MSC: SSD lost\n");
  if
  :: RDOK(0) -> RDMSG(0); crash_mirror(0); replay(0)
  :: RDOK(1) && (mfail[0] || !SAMEMIRRORS) ->
     RDMSG(1); crash_mirror(1); replay(1)
  :: nfailed == NMIR
  fi;
  for (x : 0 .. NLBA - 1) {
    check(x, bdur[x], cov[x])
  }
}

init
{
  byte x, m, p, s, n, lb, lbase, st, v, lw;
  byte mp[NLBA];

  atomic {
    reset_log_ram();
    for (m : 0 .. NMIR - 1) {
      hintseq[m] = 1
    }
    m = 0;
    tailpos = 0;
    nextseq = 1;
#if INFLIGHT > 1
    nextlo = 1;
#endif
    baseseq = 1;
    rebase = 1;
    basefrom = 0;
    hseq = 1;
    startdur = true;
    opsleft = MAXOPS;
    runno = 1;
    up = true;
    started = true;
    if
#ifndef NO_CRASH
    :: maycrash = true
#endif
#ifndef ONLY_CRASH
    :: maycrash = false
#endif
    fi;
    run writer();
    run flusher();
    run client(0);
    run client(1);
    run starter()
  }
  do
  :: atomic { up && maycrash && CRASH_OK ->
       /* Crash now, at any step of any process.  Then either the SSD
        * is lost and the log of a surviving mirror is replayed, or it
        * is intact and is reloaded (and, if a run is left, the gateway
        * starts again).
        */
       printf("MSC: CRASH\n");
       forget_ram();
       up = false;
       crashing = true }
  :: atomic { crashing ->
       /* (a step of its own: the crash images of many states are the
        * same, and what follows is explored once for each)
        */
       crashing = false;
       if
       :: /* the SSD is lost (not as well as every mirror: that loses
           * what only the log and the SSD held)
           */
          !nolog;
          crash_backend();
          ssd_lost();
          halt();
          break
       :: /* the SSD is intact */
          crash_backend();
          crash_ssd();
#ifdef WAL
          /* what the SSD holds now is checked after the redo (the
           * starter's C_REDO2, or below in the last run)
           */
          crash_mirrors();
          m = 0;
          restart();
          if
          :: runno == MAXRUNS ->
             redo_apply();
             redo_end(x, v);
             halt();
             break
          :: else ->
             runno++;
             up = true;
             if
#ifndef NO_CRASH
             :: maycrash = true
#endif
#ifndef ONLY_CRASH
             :: maycrash = false
#endif
             fi
          fi
#else
          for (x : 0 .. NLBA - 1) {
            v = (cst[x] != S_FREE -> cdat[x] : bdur[x]);
            check(x, v, cov[x])
          }
          if
          :: runno == MAXRUNS ->
             halt();
             break
          :: else ->
             crash_mirrors();
             m = 0;
             restart();
             /* what a client reads now counts as completed */
             for (x : 0 .. NLBA - 1) {
               v = (cst[x] != S_FREE -> cdat[x] : bdur[x]);
               done[x] = ((v != TZ && v > cov[x]) -> v : cov[x])
             }
             x = 0;
             v = 0;
             runno++;
             up = true;
             if
#ifndef NO_CRASH
             :: maycrash = true
#endif
#ifndef ONLY_CRASH
             :: maycrash = false
#endif
             fi
          fi
#endif
       fi }
  :: atomic { up && nfailed < MAXFAIL && !mfail[0] && FAIL_OK -> failmirror(0) }
  :: atomic { up && nfailed < MAXFAIL && !mfail[1] && FAIL_OK -> failmirror(1) }
#ifdef HEAL
  :: atomic { up && mst[0] == M_FAILED -> healmirror(0) }
  :: atomic { up && mst[1] == M_FAILED -> healmirror(1) }
#endif
  :: atomic { up && !maycrash && cdone == NCLIENT ->
       /* no crash: every operation completed, the newest data reads */
       for (x : 0 .. NLBA - 1) {
         v = (cst[x] != S_FREE -> cdat[x] : bcur[x]);
         check(x, v, done[x])
       }
#ifdef HEAL
       /* Closed (C: hhc_close: log_stop voids what it can, the backend
        * is flushed); then the SSD may be lost before the next start.
        */
#ifdef VOID_CLOSE
       void_healed(x);
#endif
       bflush();
       if
       :: !nolog -> printf("MSC: closed\n"); ssd_lost()
       :: skip
       fi;
#endif
       halt();
       break }
  :: timeout ->
     /* nothing can move, yet a client is not done: deadlock */
     assert(P4_no_deadlock)
  od
}
