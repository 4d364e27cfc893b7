/* hhccommit.pml: a Promela model of the one-sync cache commit, a
 * DESIGN not built yet (bench/results/pipeline.md, "Why
 * `ssd-sync=flush` stays at ~0.5x the local disk: a one-sync commit,
 * worked through", rules 1-7), checked by spin from
 * tests/model/check-commit.sh.  README.md in this directory ("The
 * one-sync cache commit") says what is modelled and what spin found.
 *
 * The design.  Each metadata entry (slot -> lba, free or dirty) carries
 * the checksum of its slot's data and a "fresh" flag: this commit's
 * snapshot is the first to map the slot to that lba.  Each page copy
 * written by commit N carries seq N and the number of pages N wrote.
 * Commit N: snapshot the dirty pages (recording each fresh slot's
 * checksum), write each page over its older copy (A/B), ONE sync,
 * acknowledge the FLUSH, then the slots N freed become reusable; N+1
 * starts after N's sync returned.  Copy-on-write window: a block whose
 * slot is fresh in commit N is not rewritten in place from N's snapshot
 * until a later commit is durable; it goes to a new slot.  Load: the
 * group of copies with the highest seq is complete if as many valid
 * copies carry that seq as they say and each fresh entry's checksum
 * matches its slot; if not, each of its pages falls back to its other
 * copy and the torn copies are erased and synced before anything else
 * is written.
 *
 * Two rules the design needed that the brief did not state (found by
 * spin, README.md): the load reopens the window for the fresh entries
 * of the group it loads (MUT_LOAD_NO_WINDOW without it), and the
 * commit takes its dirty-page list and snapshots all its pages in one
 * step that no copy-on-write publish can split (MUT_SNAP_PER_PAGE: per
 * page, as cache-commit.c does today).
 *
 * Scope: NB = 2 blocks, NS = 4 slots, NP pages of EPP entries (slot s
 * is entry s % EPP of page s / EPP), one client that writes (MAXW
 * writes in all), one committer (MAXCOMMIT commits in all: each
 * acknowledges a FLUSH issued at its start, i.e. covers every write
 * completed by then), a crash at any step (MAXCRASH in all), then a
 * load and the check.  Block b's k-th write writes VAL(b, k) = b*8+k;
 * VAL(b, 0) is the backend's data (no write-back here: the backend
 * never changes); a slot never written holds JUNK, no block's data.
 * The checksum of data v is v itself.
 *
 * Every step is one atomic branch of the main loop over global state,
 * so a crash is one branch that forgets the RAM state.
 *
 * Mutants (-DMUT_...), each one rule undone; check-commit.sh runs them:
 *   MUT_INPLACE_FRESH   no copy-on-write window: fresh slots rewritten
 *                       in place
 *   MUT_WINDOW_AT_SYNC  the window opens at the commit's sync, not at
 *                       its snapshot
 *   MUT_NO_HOLD         an in-place write does not hold off the
 *                       snapshot of its page while it runs
 *   MUT_EMPTY_CLOSES    a commit that wrote no page (a sync only)
 *                       closes the window too
 *   MUT_PER_PAGE        no page count: each page's newest valid copy
 *                       wins on its own (falling back alone when its
 *                       own fresh checksums fail)
 *   MUT_NO_ERASE        the torn group is rolled back in memory, not
 *                       erased on disk
 *   MUT_REUSE_EARLY     slots freed by N are reusable before N's sync
 *   MUT_CHECK_ALL       the load checks every entry's checksum, not
 *                       only the fresh ones
 *   MUT_LOAD_NO_WINDOW  the load does not reopen the window (the
 *                       design as briefed)
 *   MUT_SNAP_PER_PAGE   dirty list at the commit's start, then one
 *                       snapshot step per page (as briefed, and as C)
 */

#ifndef MAXW
#define MAXW 3
#endif
#ifndef MAXCOMMIT
#define MAXCOMMIT 4
#endif
#ifndef MAXCRASH
#define MAXCRASH 2
#endif
#ifndef EPP
#define EPP 2
#endif
#define NB 2
#define NS 4
#define NP (NS / EPP)
#define NCP (2 * NP)            /* page p, copy c: 2p + c */
#define NONE 255
#define JUNK 15                 /* a slot never written: no block's data */
#define VAL(b, k) ((b) * 8 + (k))

#if NP != 2 && NP != 4
#error "EPP must be 1 or 2"
#endif
#if defined(MUT_SNAP_PER_PAGE) && NP != 2
#error "MUT_SNAP_PER_PAGE needs EPP=2"
#endif

/* A metadata page copy (cache-format.h, plus seq count and, per entry,
 * the fresh flag and the checksum).
 */
typedef Copy {
  bit valid;
  byte seq;
  byte cnt;                     /* pages its commit wrote */
  bit used[EPP];                /* dirty (used) or free */
  bit lba[EPP];
  bit fr[EPP];                  /* fresh in this commit */
  byte ck[EPP]                  /* checksum of the slot's data */
};

/* ---- the SSD ---- */
Copy dk[NCP];                   /* durable page copies */
Copy pw[NCP];                   /* the write issued to each since the last sync */
bit pp[NCP];                    /* ... if any */
byte dd[NS];                    /* durable slot data */
short pm[NS];                   /* bit v: v written to the slot since the last sync */
byte cur[NS];                   /* newest data written to the slot */

/* ---- RAM ---- */
byte map[NB];                   /* block -> slot (NONE) */
bit sused[NS];                  /* slot state: dirty (1) or free (0) */
bit slba[NS];
byte mck[NS];                   /* in-memory checksum of the slot */
bit nw[NS];                     /* mapped, no snapshot has recorded it yet */
byte prot[NS];                  /* window: open while wclk <= prot (0: none) */
bit pend[NS];                   /* freed, on the pending list */
bit taken[NS];                  /* freed, taken by the commit in progress */
bit busy[NS];                   /* allocated by a write not yet published */
bit pdirty[NP];
bit hold[NP];                   /* an in-place write runs in the page */
byte csq[NCP];                  /* C copy_seq: which copy is older */
byte cseq;                      /* C commit_seq */
byte wclk;                      /* seq of the newest durable commit */

/* ---- the client (one write at a time) ---- */
byte wpc;                       /* 0 idle, 1-2 in place, 3-4 copy on write */
byte wb;                        /* its block */
byte wt;                        /* the slot it writes */
byte ws;                        /* the block's slot it replaces (COW) */
byte nwr;                       /* writes begun */

/* ---- the committer ---- */
byte cpc;                       /* 0 idle, 1 snapshotting (per page), 3 sync next */
byte ncom;                      /* commits begun */
byte nseq;                      /* this commit's seq */
byte npg;                       /* its page count */
bit inc[NP];                    /* page in this commit */
bit snapd[NP];                  /* ... snapshotted */
Copy sb[NP];                    /* snapshot buffers */
bit sfr[NS];                    /* MUT_WINDOW_AT_SYNC: marked fresh by it */

/* ---- faults ---- */
byte ncrash;
bit erasing;                    /* the load's erase is not synced yet */

/* ---- ghost ---- */
byte wcnt[NB];                  /* writes begun per block (newest k) */
byte done[NB];                  /* newest completed write */
byte cov[NB];                   /* what the commit in progress covers */
byte ackk[NB];                  /* newest acknowledged (or read after a load) */

/* the crash's loop counters: live across its choices, so not hidden
 * (pan restores no hidden variable that a d_step changed); 0 between
 * steps
 */
byte ks, kv, kj;

/* scratch: set before use in every step, never live across a choice;
 * named h... because pan.c's own locals (t, ...) would shadow one-letter
 * globals in the code it generates
 */
hidden byte hi, hj, hs, hp, hb, hv, hn, hg, hg2, ho, hc, ht;
hidden byte hok;
hidden byte hch[NP];
hidden byte htorn[NCP];

/* Names that spin prints with a failed assertion (always 0). */
hidden byte P1_acked_data_kept;
hidden byte P2_only_written_data;
hidden byte MODEL_bounds;

#ifdef MUT_INPLACE_FRESH
#define WINDOW(x) 0
#else
#define WINDOW(x) (prot[x] != 0 && wclk <= prot[x])
#endif
#ifdef MUT_NO_HOLD
#define HELD(q) 0
#else
#define HELD(q) hold[q]
#endif
#define ALLOC_OK(x) (!sused[x] && !pend[x] && !taken[x] && !busy[x])
#if NP == 2
#define HELD_DIRTY ((pdirty[0] && HELD(0)) || (pdirty[1] && HELD(1)))
#else
#define HELD_DIRTY ((pdirty[0] && HELD(0)) || (pdirty[1] && HELD(1)) || \
                    (pdirty[2] && HELD(2)) || (pdirty[3] && HELD(3)))
#endif

inline clear_copy(d) {
  d.valid = 0; d.seq = 0; d.cnt = 0;
  hi = 0;
  do
  :: hi < EPP -> d.used[hi] = 0; d.lba[hi] = 0; d.fr[hi] = 0; d.ck[hi] = 0; hi++
  :: else -> break
  od
}

inline copy_copy(d, e) {
  d.valid = e.valid; d.seq = e.seq; d.cnt = e.cnt;
  hi = 0;
  do
  :: hi < EPP -> d.used[hi] = e.used[hi]; d.lba[hi] = e.lba[hi];
                d.fr[hi] = e.fr[hi]; d.ck[hi] = e.ck[hi]; hi++
  :: else -> break
  od
}

/* ------------------------------------------------------------------ */
/* The client's write: decide in place or copy on write; write the
 * data; update the checksum; (COW) publish.
 */

inline write_begin() {
  nwr++;
  wcnt[wb]++;
  assert(MODEL_bounds || wcnt[wb] < 8);
  hs = map[wb];
  if
  :: hs != NONE && !WINDOW(hs) ->
     /* a dirty block outside the window: in place, holding off the
      * snapshot of its page (C: the page lock) until the checksum is
      * updated
      */
     printf("MSC: write %d data %d: in place, slot %d\n", wb, VAL(wb, wcnt[wb]), hs);
     wt = hs; ws = NONE; hold[hs / EPP] = 1; wpc = 1
  :: else ->
     printf("MSC: write %d data %d: new slot (old %d)\n", wb, VAL(wb, wcnt[wb]), hs);
     wt = NONE; ws = hs; wpc = 3
  fi
}

/* COW or miss into free slot t: data and checksum (the slot is not
 * mapped yet, so no other step sees it between the two).
 */
inline write_new(x) {
  wt = x;
  busy[wt] = 1;
  hv = VAL(wb, wcnt[wb]);
  cur[wt] = hv;
  pm[wt] = pm[wt] | (1 << hv);
  mck[wt] = hv;
  printf("MSC: write %d data %d into slot %d\n", wb, hv, wt);
  wpc = 4
}

/* ------------------------------------------------------------------ */
/* The committer. */

/* The window of fresh slot x opens (prot = the seq the commit will
 * have; open until a later commit is durable).
 */
#ifdef MUT_WINDOW_AT_SYNC
#define MARK(x) sfr[x] = 1
#else
#define MARK(x) prot[x] = wclk + 1
#endif

inline commit_start() {
  ncom++;
  nseq = cseq + 1;
  hb = 0;
  do
  :: hb < NB -> cov[hb] = done[hb]; hb++
  :: else -> break
  od;
  /* take the pending list: their "free" is in the dirty pages */
  hs = 0;
  do
  :: hs < NS ->
#ifndef MUT_REUSE_EARLY
     taken[hs] = pend[hs];
#endif
     pend[hs] = 0; hs++
  :: else -> break
  od;
  npg = 0;
  hp = 0;
  do
  :: hp < NP -> inc[hp] = pdirty[hp]; npg = npg + pdirty[hp]; hp++
  :: else -> break
  od;
  printf("MSC: commit %d begins: %d pages, covers %d %d\n", nseq, npg, cov[0], cov[1])
}

inline snap(pg) {
  hi = 0;
  do
  :: hi < EPP ->
     hs = pg * EPP + hi;
     sb[pg].used[hi] = sused[hs];
     if
     :: sused[hs] ->
        sb[pg].lba[hi] = slba[hs];
        sb[pg].fr[hi] = nw[hs];
        sb[pg].ck[hi] = mck[hs];
        if
        :: nw[hs] -> nw[hs] = 0; MARK(hs)
        :: else
        fi
     :: else -> sb[pg].lba[hi] = 0; sb[pg].fr[hi] = 0; sb[pg].ck[hi] = 0
     fi;
     hi++
  :: else -> break
  od;
  pdirty[pg] = 0;
  snapd[pg] = 1;
  printf("MSC: commit %d snapshots page %d\n", nseq, pg)
}

/* Write each snapshotted page over its older copy (not synced). */
inline write_pages() {
  hp = 0;
  do
  :: hp < NP ->
     if
     :: inc[hp] ->
        if
        :: csq[2 * hp] <= csq[2 * hp + 1] -> hj = 2 * hp
        :: else -> hj = 2 * hp + 1
        fi;
        assert(MODEL_bounds || !pp[hj]);
        copy_copy(pw[hj], sb[hp]);
        pw[hj].valid = 1;
        pw[hj].seq = nseq;
        pw[hj].cnt = npg;
        pp[hj] = 1;
        csq[hj] = nseq;
        clear_copy(sb[hp]);
        inc[hp] = 0;
        snapd[hp] = 0
     :: else
     fi;
     hp++
  :: else -> break
  od
}

/* The one sync; acknowledge; the taken slots join the pool. */
inline sync_ack() {
  hs = 0;
  do
  :: hs < NS -> dd[hs] = cur[hs]; pm[hs] = 0; hs++
  :: else -> break
  od;
  hj = 0;
  do
  :: hj < NCP ->
     if
     :: pp[hj] -> copy_copy(dk[hj], pw[hj]); clear_copy(pw[hj]); pp[hj] = 0
     :: else
     fi;
     hj++
  :: else -> break
  od;
  if
  :: npg > 0 -> cseq = nseq; wclk++
#ifdef MUT_EMPTY_CLOSES
  :: else -> wclk++
#else
  :: else
#endif
  fi;
#ifdef MUT_WINDOW_AT_SYNC
  hs = 0;
  do
  :: hs < NS -> if :: sfr[hs] -> prot[hs] = wclk; sfr[hs] = 0 :: else fi; hs++
  :: else -> break
  od;
#endif
  hb = 0;
  do
  :: hb < NB -> if :: cov[hb] > ackk[hb] -> ackk[hb] = cov[hb] :: else fi; cov[hb] = 0; hb++
  :: else -> break
  od;
  hs = 0;
  do
  :: hs < NS -> taken[hs] = 0; hs++
  :: else -> break
  od;
  printf("MSC: commit %d synced, FLUSH acknowledged: acked %d %d\n", nseq, ackk[0], ackk[1]);
  npg = 0;
  nseq = 0;
  cpc = 0
}

/* ------------------------------------------------------------------ */
/* The load after a crash, and the check. */

/* c: the newest valid copy of page p (NONE if neither is valid) */
inline newest(pg) {
  if
  :: dk[2 * pg].valid && (!dk[2 * pg + 1].valid || dk[2 * pg].seq > dk[2 * pg + 1].seq) ->
     hc = 2 * pg
  :: else ->
     if
     :: dk[2 * pg + 1].valid -> hc = 2 * pg + 1
     :: else -> hc = NONE
     fi
  fi
}

#ifdef MUT_CHECK_ALL
#define CHECKED(cp, e) (dk[cp].used[e])
#else
#define CHECKED(cp, e) (dk[cp].used[e] && dk[cp].fr[e])
#endif

/* ok = 0 if a checked entry of copy cp does not match its slot */
inline check_sums(cp) {
  hi = 0;
  do
  :: hi < EPP ->
     if
     :: CHECKED(cp, hi) && dd[(cp / 2) * EPP + hi] != dk[cp].ck[hi] -> hok = 0
     :: else
     fi;
     hi++
  :: else -> break
  od
}

inline load() {
  /* the highest seq */
  hg = 0;
  hj = 0;
  do
  :: hj < NCP -> if :: dk[hj].valid && dk[hj].seq > hg -> hg = dk[hj].seq :: else fi; hj++
  :: else -> break
  od;
  hj = 0;
  do
  :: hj < NCP -> htorn[hj] = 0; hj++
  :: else -> break
  od;
#ifndef MUT_PER_PAGE
  /* its group: complete? */
  hn = 0;
  hok = 1;
  hj = 0;
  do
  :: hj < NCP ->
     if
     :: dk[hj].valid && dk[hj].seq == hg -> hn++; check_sums(hj)
     :: else
     fi;
     hj++
  :: else -> break
  od;
  hj = 0;
  do
  :: hj < NCP -> if :: dk[hj].valid && dk[hj].seq == hg && dk[hj].cnt != hn -> hok = 0 :: else fi; hj++
  :: else -> break
  od;
  hp = 0;
  do
  :: hp < NP ->
     newest(hp);
     if
     :: !hok && hc != NONE && dk[hc].seq == hg ->
        htorn[hc] = 1;
        if :: dk[hc ^ 1].valid -> hc = hc ^ 1 :: else -> hc = NONE fi
     :: else
     fi;
     hch[hp] = hc;
     hp++
  :: else -> break
  od;
  printf("MSC: load: group %d of %d copies, %d\n", hg, hn, hok);
#else
  /* each page on its own */
  hp = 0;
  do
  :: hp < NP ->
     newest(hp);
     if
     :: hc != NONE ->
        hok = 1;
        check_sums(hc);
        if
        :: !hok ->
           htorn[hc] = 1;
           if :: dk[hc ^ 1].valid -> hc = hc ^ 1 :: else -> hc = NONE fi
        :: else
        fi
     :: else
     fi;
     hch[hp] = hc;
     hp++
  :: else -> break
  od;
#endif

  /* RAM from the chosen copies */
  hb = 0;
  do
  :: hb < NB -> map[hb] = NONE; hb++
  :: else -> break
  od;
  hs = 0;
  do
  :: hs < NS ->
     sused[hs] = 0; slba[hs] = 0; mck[hs] = 0; nw[hs] = 0; prot[hs] = 0;
     pend[hs] = 0; taken[hs] = 0; busy[hs] = 0; sfr[hs] = 0;
     pm[hs] = 0; cur[hs] = dd[hs];
     hs++
  :: else -> break
  od;
  hp = 0;
  do
  :: hp < NP -> pdirty[hp] = 0; hold[hp] = 0; inc[hp] = 0; snapd[hp] = 0; clear_copy(sb[hp]); hp++
  :: else -> break
  od;
  hp = 0;
  do
  :: hp < NP ->
     hc = hch[hp];
     ht = 0;
     do
     :: hc != NONE && ht < EPP ->
        if
        :: dk[hc].used[ht] ->
           hs = hp * EPP + ht;
           hb = dk[hc].lba[ht];
           ho = map[hb];
           if
           :: ho == NONE -> map[hb] = hs; sused[hs] = 1; slba[hs] = hb
           :: ho != NONE ->
              /* an LBA in two slots: the newer page wins, then the
               * fresh entry; the loser is free
               */
              hg2 = hch[ho / EPP];
              if
              :: dk[hc].seq > dk[hg2].seq ||
                 (dk[hc].seq == dk[hg2].seq && dk[hc].fr[ht] && !dk[hg2].fr[ho % EPP]) ->
                 sused[ho] = 0; pdirty[ho / EPP] = 1;
                 map[hb] = hs; sused[hs] = 1; slba[hs] = hb
              :: else -> pdirty[hp] = 1
              fi
           fi
        :: else
        fi;
        ht++
     :: else -> break
     od;
     hp++
  :: else -> break
  od;
  /* the newest loaded group's fresh slots: the window is open again
   * until this run's first commit is durable (a rewrite in place would
   * make the next load roll that group back)
   */
  hg2 = 0;
  hp = 0;
  do
  :: hp < NP -> if :: hch[hp] != NONE && dk[hch[hp]].seq > hg2 -> hg2 = dk[hch[hp]].seq :: else fi; hp++
  :: else -> break
  od;
  hs = 0;
  do
  :: hs < NS ->
     if
     :: sused[hs] ->
        mck[hs] = dd[hs];
#ifndef MUT_LOAD_NO_WINDOW
        if
        :: dk[hch[hs / EPP]].seq == hg2 && dk[hch[hs / EPP]].fr[hs % EPP] -> prot[hs] = hg
        :: else
        fi
#endif
     :: else
     fi;
     hs++
  :: else -> break
  od;
  hj = 0;
  do
  :: hj < NCP -> if :: dk[hj].valid && !htorn[hj] -> csq[hj] = dk[hj].seq :: else -> csq[hj] = 0 fi; hj++
  :: else -> break
  od;
  cseq = hg;
  wclk = hg;

  /* the check: each block reads the acknowledged data or newer
   * written data; what it reads counts as acknowledged from now on
   */
  hb = 0;
  do
  :: hb < NB ->
     if
     :: map[hb] != NONE -> hv = dd[map[hb]]
     :: else -> hv = VAL(hb, 0)
     fi;
     printf("MSC: check block %d reads %d (slot %d), acked %d, written %d\n",
            hb, hv, map[hb], VAL(hb, ackk[hb]), VAL(hb, wcnt[hb]));
     assert(P2_only_written_data || (hv / 8 == hb && hv % 8 <= wcnt[hb]));
     assert(P1_acked_data_kept || hv % 8 >= ackk[hb]);
     ackk[hb] = hv % 8;
     done[hb] = hv % 8;
     cov[hb] = 0;
     hb++
  :: else -> break
  od;

  wpc = 0; wb = 0; wt = 0; ws = 0;
  cpc = 0; npg = 0; nseq = 0;
  erasing = 0;
#ifndef MUT_NO_ERASE
  /* erase the torn copies, synced before anything else is written */
  hj = 0;
  do
  :: hj < NCP ->
     if
     :: htorn[hj] -> clear_copy(pw[hj]); pp[hj] = 1; erasing = 1
     :: else
     fi;
     hj++
  :: else -> break
  od
#endif
}

/* A crash: of each slot's writes since the last sync, none or any one
 * lands; each page copy's pending write lands or not; RAM is lost.
 */
inline crash() {
  ks = 0;
  do
  :: ks < NS ->
     kv = 0;
     do
     :: pm[ks] != 0 && kv < 16 ->
        if
        :: (pm[ks] >> kv) & 1 -> dd[ks] = kv
        :: true
        fi;
        kv++
     :: else -> break
     od;
     ks++
  :: else -> break
  od;
  kj = 0;
  do
  :: kj < NCP ->
     if
     :: pp[kj] -> copy_copy(dk[kj], pw[kj])
     :: pp[kj] -> skip
     :: else
     fi;
     clear_copy(pw[kj]);
     pp[kj] = 0;
     kj++
  :: else -> break
  od;
  ks = 0; kv = 0; kj = 0;
  ncrash++;
  printf("MSC: crash %d: slots %d %d %d %d\n", ncrash, dd[0], dd[1], dd[2], dd[3]);
  load()
}

/* ------------------------------------------------------------------ */

init {
  /* the formatted cache: copy A of each page, seq 1, all free */
  atomic {
    hp = 0;
    do
    :: hp < NP -> dk[2 * hp].valid = 1; dk[2 * hp].seq = 1; dk[2 * hp].cnt = NP; csq[2 * hp] = 1; hp++
    :: else -> break
    od;
    hs = 0;
    do
    :: hs < NS -> dd[hs] = JUNK; cur[hs] = JUNK; hs++
    :: else -> break
    od;
    hb = 0;
    do
    :: hb < NB -> map[hb] = NONE; hb++
    :: else -> break
    od;
    cseq = 1;
    wclk = 1
  };
  do
  /* the client */
  :: d_step { wpc == 0 && nwr < MAXW && !erasing -> wb = 0; write_begin() }
  :: d_step { wpc == 0 && nwr < MAXW && !erasing -> wb = 1; write_begin() }
  :: d_step { wpc == 1 ->
       hv = VAL(wb, wcnt[wb]); cur[wt] = hv; pm[wt] = pm[wt] | (1 << hv);
       printf("MSC: write %d data %d lands in slot %d\n", wb, hv, wt);
       wpc = 2 }
  :: d_step { wpc == 2 ->
       mck[wt] = VAL(wb, wcnt[wb]); hold[wt / EPP] = 0; done[wb] = wcnt[wb];
       printf("MSC: write %d done (checksum updated)\n", wb);
       wpc = 0; wt = 0 }
  :: d_step { wpc == 3 && ALLOC_OK(0) -> write_new(0) }
  :: d_step { wpc == 3 && ALLOC_OK(1) -> write_new(1) }
  :: d_step { wpc == 3 && ALLOC_OK(2) -> write_new(2) }
  :: d_step { wpc == 3 && ALLOC_OK(3) -> write_new(3) }
  :: d_step { wpc == 4 ->
       /* publish: map the new slot, free the old one (pending) */
       if
       :: ws != NONE -> sused[ws] = 0; nw[ws] = 0; prot[ws] = 0; pend[ws] = 1; pdirty[ws / EPP] = 1
       :: else
       fi;
       map[wb] = wt; sused[wt] = 1; slba[wt] = wb; nw[wt] = 1; prot[wt] = 0;
       busy[wt] = 0; pdirty[wt / EPP] = 1; done[wb] = wcnt[wb];
       printf("MSC: write %d done: slot %d published, slot %d freed\n", wb, wt, ws);
       wpc = 0; wt = 0; ws = 0 }

  /* the committer */
#ifndef MUT_SNAP_PER_PAGE
  /* dirty list and snapshot in one step (no publish splits it) */
  :: d_step { cpc == 0 && ncom < MAXCOMMIT && !erasing && !HELD_DIRTY ->
       commit_start();
       hp = 0;
       do
       :: hp < NP -> if :: inc[hp] -> snap(hp) :: else fi; hp++
       :: else -> break
       od;
       write_pages();
       cpc = 3 }
#else
  /* dirty list at the start, then each page under its own lock */
  :: d_step { cpc == 0 && ncom < MAXCOMMIT && !erasing ->
       commit_start();
       if :: npg > 0 -> cpc = 1 :: else -> cpc = 3 fi }
  :: d_step { cpc == 1 && inc[0] && !snapd[0] && !HELD(0) ->
       snap(0);
       if :: !inc[1] -> write_pages(); cpc = 3 :: else fi }
  :: d_step { cpc == 1 && inc[1] && !snapd[1] && (!inc[0] || snapd[0]) && !HELD(1) ->
       snap(1);
       write_pages();
       cpc = 3 }
#endif
  :: d_step { cpc == 3 -> sync_ack() }

  /* the load's erase reaches the disk */
  :: d_step { erasing ->
       hj = 0;
       do
       :: hj < NCP ->
          if :: pp[hj] -> copy_copy(dk[hj], pw[hj]); clear_copy(pw[hj]); pp[hj] = 0 :: else fi;
          hj++
       :: else -> break
       od;
       printf("MSC: load: torn copies erased and synced\n");
       erasing = 0 }

  /* a crash, then the load and the check */
  :: atomic { ncrash < MAXCRASH -> crash() }
  od
}
